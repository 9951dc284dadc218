-- ShardRegistry.acquire: take shard leases. KEYS: 1 node HASH, then one shard HASH per
-- wanted shard. ARGV: 1 node id, 2 incarnation, 3 ttl ms.
-- A shard is granted when nobody holds it, its lease expired, or it is held under this
-- node id (ourselves, or a predecessor whose node lease join took over). Each grant to
-- another owner (node id or incarnation) raises owner_epoch by one; the epoch is never
-- reset. Returns one owner_epoch per shard key (0 = not granted); all 0 when this
-- incarnation does not hold its node lease.
--#include registry_lib
local now = qim_now()
local out = {}
local mine = qim_node_held(KEYS[1], ARGV[2], now)
for i = 2, #KEYS do
  out[i - 1] = 0
  if mine then
    local s = redis.call('HMGET', KEYS[i], 'node', 'inc', 'epoch', 'exp')
    local epoch = tonumber(s[3] or '0')
    if (not s[1]) or s[1] == '' or tonumber(s[4] or '0') <= now or s[1] == ARGV[1] then
      if s[1] ~= ARGV[1] or s[2] ~= ARGV[2] then
        epoch = epoch + 1
        redis.call('HSET', KEYS[i], 'epoch', epoch, 'since', now)
      end
      redis.call('HSET', KEYS[i], 'node', ARGV[1], 'inc', ARGV[2], 'exp', now + tonumber(ARGV[3]))
      out[i - 1] = epoch
    end
  end
end
return out
