-- archive_watermark (docs/design.md §5 step 7, seed 000 ADR-0018): the archive watermark only
-- moves forward. With several Outbox partitions each has its own (every record of that
-- partition produced before it is archived) and the archive watermark is their lowest
-- (docs/decisions/0041-scale-outbox-partitions.md).
-- KEYS: 1 archive watermark STRING, then one STRING per Outbox partition.
-- ARGV: 1 this partition's index (0-based), 2 candidate (ms) for it.
-- Returns the archive watermark after the call.
local p = tonumber(ARGV[1]) + 2
local t = tonumber(ARGV[2])
if t > tonumber(redis.call('GET', KEYS[p]) or '0') then
  redis.call('SET', KEYS[p], ARGV[2])
end
local low = nil
for i = 2, #KEYS do
  local v = tonumber(redis.call('GET', KEYS[i]) or '0')
  if low == nil or v < low then low = v end
end
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if low ~= nil and low > cur then
  redis.call('SET', KEYS[1], string.format('%d', low))
  return string.format('%d', low)
end
return string.format('%d', cur)
