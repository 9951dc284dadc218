-- session_register (DESIGN.md §6, seed 004 §6): the ONE registration script of both
-- projection paths (durable dispatch consumer and the mailbox's low-latency Projection).
-- Every write is order-independent (ZADD GT, forward-only read, HSETNX), so the two
-- paths may arrive in any order and any number of times with the same result: the seed
-- lost registrations when the low-latency path wrote differently from the durable one.
-- KEYS: 1 convs ZSET, 2 read HASH, 3 peers HASH, 4 (optional, issue 14) the ZSET of
--       first registrations waiting for CQL user_conversation_state
-- ARGV: 1 conversation_id hex, 2 created_at_ms, 3 conversation_seq of the user's own
--       message ("0": the user is not the sender), 4 direct peer ("0": unknown),
--       5 (with KEYS 4) its member "<tenant hex>:<user>:<conversation hex>:<peer>"
-- Returns 1 when the conversation is new for the user, else 0.
--#include session_lib
local added = redis.call('ZADD', KEYS[1], 'GT', ARGV[2], ARGV[1])
if ARGV[3] ~= '0' then
  -- sending marks the conversation read up to the sent message
  qim_read_forward(KEYS[2], ARGV[1], ARGV[3])
end
local peer_new = 0
if ARGV[4] ~= '0' then
  peer_new = redis.call('HSETNX', KEYS[3], ARGV[1], ARGV[4])
end
if (added == 1 or peer_new == 1) and KEYS[4] then
  -- first time in the set, or its direct peer just learnt: queued for the durable list
  -- (drained into CQL user_conversation_state by the session node)
  redis.call('ZADD', KEYS[4], 'NX', ARGV[2], ARGV[5])
end
return added
