-- session_mark_read (docs/design.md §6): MARK_READ moves read_conversation_seq forward only.
-- The caller clamped the position to the newest message the actor can see.
-- KEYS: 1 read HASH, 2 UserBadgeState's dirty HASH (docs/decisions/0129)
-- ARGV: 1 conversation_id hex, 2 read_conversation_seq, 3 the badge dirty member
-- Returns {absolute read_conversation_seq after the call, 1 moved | 0 unchanged}.
--#include session_lib
local seq, moved = qim_read_forward(KEYS[1], ARGV[1], ARGV[2])
if moved == 1 and KEYS[2] then
  redis.call('HINCRBY', KEYS[2], ARGV[3], 1)
end
return {seq, moved}
