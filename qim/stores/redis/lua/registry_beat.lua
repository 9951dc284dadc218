-- ShardRegistry.heartbeat: renew a node lease and the shard leases it holds, in one call.
-- KEYS: 1 node HASH, 2 live-nodes ZSET of the kind, then one shard HASH per held shard.
-- ARGV: 1 node id, 2 incarnation, 3 ttl ms, 4 long-dead horizon ms, then one expected
-- owner_epoch per shard key.
-- Returns {"GONE"} when this incarnation lost its node lease, else
-- {"OK", {lost shard key positions (1-based)...}, {live node ids...}}. A shard is lost
-- when another owner (or another epoch) holds it; ours are extended to now + ttl.
-- Node ids whose lease ended more than the horizon ago are dropped from the ZSET.
--#include registry_lib
local now = qim_now()
local cur = redis.call('HMGET', KEYS[1], 'inc')
if cur[1] ~= ARGV[2] then
  return {'GONE'}
end
local until_ms = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'exp', until_ms)
redis.call('HINCRBY', KEYS[1], 'beat', 1)
redis.call('ZADD', KEYS[2], until_ms, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[4]))
local lost = {}
for i = 3, #KEYS do
  local s = redis.call('HMGET', KEYS[i], 'node', 'inc', 'epoch')
  if s[1] == ARGV[1] and s[2] == ARGV[2] and s[3] == ARGV[i + 2] then
    redis.call('HSET', KEYS[i], 'exp', until_ms)
  else
    lost[#lost + 1] = i - 2
  end
end
return {'OK', lost, redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf')}
