-- ShardRegistry.join: take a node lease. KEYS: 1 node HASH, 2 live-nodes ZSET of the kind.
-- ARGV: 1 node id, 2 incarnation, 3 ttl ms, 4 addr, 5 extra, 6 expected holder
-- incarnation ("" = none), 7 expected holder beat.
-- The lease is taken when absent, expired, already this incarnation's, or still held by
-- exactly the expected holder at the expected renewal count (a predecessor seen not
-- renewing). Returns {"OK", since} (when this incarnation joined, registry ms) or
-- {"HELD", holder incarnation, beat, ms left, addr}.
--#include registry_lib
local now = qim_now()
local cur = redis.call('HMGET', KEYS[1], 'inc', 'beat', 'exp', 'addr')
local exp = tonumber(cur[3] or '0')
local free = (not cur[1]) or exp <= now or cur[1] == ARGV[2]
  or (ARGV[6] ~= '' and cur[1] == ARGV[6] and (cur[2] or '0') == ARGV[7])
if not free then
  return {'HELD', cur[1], tonumber(cur[2] or '0'), exp - now, cur[4] or ''}
end
local until_ms = now + tonumber(ARGV[3])
if cur[1] ~= ARGV[2] then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'since', now, 'beat', 0)
end
redis.call('HSET', KEYS[1], 'inc', ARGV[2], 'exp', until_ms, 'addr', ARGV[4], 'extra', ARGV[5])
redis.call('ZADD', KEYS[2], until_ms, ARGV[1])
return {'OK', redis.call('HGET', KEYS[1], 'since')}
