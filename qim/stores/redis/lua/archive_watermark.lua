-- archive_watermark (docs/design.md §5 step 7, seed 000 ADR-0018): the archive watermark only
-- moves forward. KEYS: 1 watermark STRING. ARGV: 1 candidate (ms).
-- Returns the watermark after the call.
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local t = tonumber(ARGV[1])
if t > cur then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
return string.format('%d', cur)
