-- reserve_and_record (DESIGN.md §5.2): idempotency on (tenant, sender, cmid), then
-- INCR conversation_seq, freeze the audience and store the canonical MessageRecord and
-- the history index, all in one atomic call. Validation happened before this call, so
-- bad input never consumes a sequence number.
-- KEYS: 1 commit hash, 2 conversation seq, 3 message record, 4 history zset, 5 in-flight zset
-- ARGV: 1 identity digest (36 B), 2 message_id (16 B), 3 created_at_ms, 4 record bytes
--       without conversation_seq, 5 frozen audience (opaque), 6 now_ms, 7 "1" = split
--       mode (fault injection): stop at RESERVED; record.lua performs RECORDED.
-- Returns {status, state, message_id, conversation_seq, created_at_ms}; status is
-- FRESH or EXISTING. Error QIM_CONFLICT when the digest differs.
--#include commit_lib
local existing = qim_existing(KEYS[1], ARGV[1])
if existing then return existing end
local out = qim_record(KEYS, ARGV)
return out
