-- ShardRegistry.release / leave. KEYS: 1 node HASH, 2 live-nodes ZSET, then shard HASHes.
-- ARGV: 1 node id, 2 incarnation, 3 "leave" to drop the node lease too, else "".
-- Every listed shard this incarnation holds is expired at once (owner cleared, epoch
-- kept: the next owner's grant raises it). Returns how many shards were released.
local n = 0
for i = 3, #KEYS do
  local s = redis.call('HMGET', KEYS[i], 'node', 'inc')
  if s[1] == ARGV[1] and s[2] == ARGV[2] then
    redis.call('HSET', KEYS[i], 'node', '', 'inc', '', 'exp', 0)
    n = n + 1
  end
end
if ARGV[3] == 'leave' and redis.call('HGET', KEYS[1], 'inc') == ARGV[2] then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
end
return n
