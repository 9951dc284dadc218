-- materialize_dispatch (DESIGN.md §5.4): begin_dispatch (DispatchProgress) → append every
-- recipient's event group → finish_dispatch (completion + packed watermark CAS), fused
-- into one atomic call because phase one keeps all of a shard's mailboxes on one
-- instance (docs/decisions/0003-fused-materialize.md).
-- KEYS: 1 DispatchProgress hash, 2 shard watermark hash, 3.. one mailbox zset per recipient
-- ARGV: 1 payload digest, 2 log offset, 3 mailbox_seq (8 B), 4 expected wm blob
--       ("" = none stored yet), 5 new wm blob, 6 retention seconds, 7 wm epoch,
--       8.. one member per recipient (mailbox_seq 8 B ‖ event group), same order as KEYS 3..
-- Returns {"FRESH"|"DUPLICATE", mailbox_seq of the first observation}.
-- Errors: QIM_DIGEST_CONFLICT (same dispatch_id, other payload), QIM_WM_CONFLICT
-- (someone else moved the watermark: this node is not the shard's only owner).
local dp = redis.call('HMGET', KEYS[1], 'dg', 'seq')
local status = 'FRESH'
local seq = ARGV[3]
if dp[1] then
  if dp[1] ~= ARGV[1] then
    return redis.error_reply('QIM_DIGEST_CONFLICT dispatch_id seen with another payload')
  end
  status = 'DUPLICATE'
  seq = dp[2]
end
local current = redis.call('HGET', KEYS[2], 'blob') or ''
if current ~= ARGV[4] then
  return redis.error_reply('QIM_WM_CONFLICT watermark moved under us')
end
if status == 'FRESH' then
  local ttl = tonumber(ARGV[6])
  for i = 3, #KEYS do
    redis.call('ZADD', KEYS[i], tonumber(ARGV[2]), ARGV[i + 5])
    redis.call('EXPIRE', KEYS[i], ttl)
  end
  -- DispatchProgress has no TTL: its GC is disabled unless configured (DESIGN.md issue 5).
  redis.call('HSET', KEYS[1], 'dg', ARGV[1], 'seq', seq, 'off', ARGV[2])
end
redis.call('HSET', KEYS[2], 'blob', ARGV[5], 'layout', '1', 'epoch', ARGV[7])
return {status, seq}
