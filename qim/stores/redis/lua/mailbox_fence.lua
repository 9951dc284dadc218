-- The owner fence of a shard's new owner (docs/decisions/0040-scale-leases-and-fencing.md),
-- then its watermark, in one call: from here on only writes carrying this owner_epoch
-- pass (mailbox_lib qim_fenced). KEYS: 1 shard watermark HASH. ARGV: 1 owner_epoch.
-- A fence above ARGV[1] means a newer owner exists: refused (QIM_NOT_OWNER).
-- Returns {blob or false, layout or false, shard_epoch or false}.
local oe = tonumber(redis.call('HGET', KEYS[1], 'oe') or '0')
if oe > tonumber(ARGV[1]) then
  error({err = 'QIM_NOT_OWNER owner_epoch ' .. ARGV[1] .. ' is stale: the shard is fenced at ' .. oe})
end
redis.call('HSET', KEYS[1], 'oe', ARGV[1])
return redis.call('HMGET', KEYS[1], 'blob', 'layout', 'epoch')
