-- session_register (DESIGN.md §6, seed 004 §6): the ONE registration script of both
-- projection paths (durable dispatch consumer and the mailbox's low-latency Projection).
-- Every write is order-independent (ZADD GT, forward-only read, HSETNX), so the two
-- paths may arrive in any order and any number of times with the same result: the seed
-- lost registrations when the low-latency path wrote differently from the durable one.
-- KEYS: 1 convs ZSET, 2 read HASH, 3 peers HASH
-- ARGV: 1 conversation_id hex, 2 created_at_ms, 3 conversation_seq of the user's own
--       message ("0": the user is not the sender), 4 direct peer ("0": unknown)
-- Returns 1 when the conversation is new for the user, else 0.
--#include session_lib
local added = redis.call('ZADD', KEYS[1], 'GT', ARGV[2], ARGV[1])
if ARGV[3] ~= '0' then
  -- sending marks the conversation read up to the sent message
  qim_read_forward(KEYS[2], ARGV[1], ARGV[3])
end
if ARGV[4] ~= '0' then
  redis.call('HSETNX', KEYS[3], ARGV[1], ARGV[4])
end
return added
