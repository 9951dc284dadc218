-- hlc_lease (DESIGN.md §3 message_id): lease a clock window strictly above the stored
-- high-water, so ids never repeat across crash, restart or a clock stepped back.
-- KEYS: 1 high-water key of (region, writer_id)
-- ARGV: 1 now_ms, 2 window_ms, 3 expected high-water ("" = fresh lease at start)
-- Fresh: start = max(now, high + 1), end = start + window.
-- Extend (the live holder renewing): only if the stored high-water is still ours;
-- end = max(now, high) + window and the start is unchanged.
-- Returns {start_ms or "", end_ms}; error QIM_HLC_LOST when another process leased.
local high = tonumber(redis.call('GET', KEYS[1]) or '0')
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
if ARGV[3] ~= '' then
  if high ~= tonumber(ARGV[3]) then
    return redis.error_reply('QIM_HLC_LOST high-water moved by another writer')
  end
  local stop = math.max(now, high) + window
  redis.call('SET', KEYS[1], string.format('%d', stop))
  return {'', string.format('%d', stop)}
end
local start = now
if start <= high then start = high + 1 end
local stop = start + window
redis.call('SET', KEYS[1], string.format('%d', stop))
return {string.format('%d', start), string.format('%d', stop)}
