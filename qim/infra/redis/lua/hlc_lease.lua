-- hlc_lease (DESIGN.md §3 message_id): lease a clock window strictly above the stored
-- high-water, so ids never repeat across crash, restart or a clock stepped back.
-- KEYS: 1 high-water key of (region, writer_id)
-- ARGV: 1 now_ms, 2 window_ms
-- Returns {start_ms, end_ms}: ids may use unix_ms in [start_ms, end_ms).
local high = tonumber(redis.call('GET', KEYS[1]) or '0')
local now = tonumber(ARGV[1])
local start = now
if start <= high then start = high + 1 end
local stop = start + tonumber(ARGV[2])
redis.call('SET', KEYS[1], string.format('%d', stop))
return {string.format('%d', start), string.format('%d', stop)}
