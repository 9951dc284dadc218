-- hlc_lease (docs/design.md §3 message_id): lease a clock window strictly above the
-- cluster-wide high-water, the highest issue ceiling any writer ever published. Every
-- writer issues ids only up to its own published ceiling, so a window above the cluster
-- value lies above every id ever issued, by any writer_id: ids never repeat across
-- crash, restart or a clock stepped back, and HLC time never goes backwards for the
-- cluster when a writer restarts (docs/decisions/0017). The (region, writer_id) key
-- holds the window end for the holder's compare-and-set renewals; a restart no longer
-- starts above it (that put a restarted writer up to a window, 60 s, in the future).
-- KEYS: 1 high-water key of (region, writer_id), 2 cluster high-water key
-- ARGV: 1 now_ms, 2 window_ms, 3 expected high-water ("" = fresh lease at start),
--       4 ceiling slack ms
-- Fresh: start = max(now, cluster + 1), end = start + window; the first issue ceiling
-- max(now + slack, start + 1) is published to the cluster key (it exceeds the cluster
-- value). A start already ahead of now (another writer's ceiling) gets only 1 ms of
-- headroom, so quick successive starts do not stack slack upon slack.
-- Extend (the live holder renewing): only if the stored high-water is still ours;
-- end = max(now, high) + window and the start is unchanged.
-- Returns {start_ms or "", end_ms, ceiling_ms or ""}; error QIM_HLC_LOST when another
-- process leased.
local high = tonumber(redis.call('GET', KEYS[1]) or '0')
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
if ARGV[3] ~= '' then
  if high ~= tonumber(ARGV[3]) then
    return redis.error_reply('QIM_HLC_LOST high-water moved by another writer')
  end
  local stop = math.max(now, high) + window
  redis.call('SET', KEYS[1], string.format('%d', stop))
  return {'', string.format('%d', stop), ''}
end
local cluster = tonumber(redis.call('GET', KEYS[2]) or '0')
local start = math.max(now, cluster + 1)
local stop = start + window
local ceiling = math.max(now + tonumber(ARGV[4]), start + 1)
redis.call('SET', KEYS[1], string.format('%d', stop))
redis.call('SET', KEYS[2], string.format('%d', ceiling))
return {string.format('%d', start), string.format('%d', stop), string.format('%d', ceiling)}
