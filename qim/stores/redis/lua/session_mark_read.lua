-- session_mark_read (docs/design.md §6): MARK_READ moves read_conversation_seq forward only.
-- The caller clamped the position to the newest message the actor can see.
-- KEYS: 1 read HASH
-- ARGV: 1 conversation_id hex, 2 read_conversation_seq
-- Returns {absolute read_conversation_seq after the call, 1 moved | 0 unchanged}.
--#include session_lib
local seq, moved = qim_read_forward(KEYS[1], ARGV[1], ARGV[2])
return {seq, moved}
