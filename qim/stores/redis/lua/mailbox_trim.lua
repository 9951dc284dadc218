-- Trim expired day buckets of one user and persist the trim boundary (docs/design.md §5.5).
-- KEYS: 1 day index, then one bucket key per expired day. ARGV: the expired days.
-- The boundary (field "trim") is the highest log offset ever removed; a non-zero
-- cursor below it gets CURSOR_EXPIRED. Returns the boundary (-1: nothing removed).
local trim = tonumber(redis.call('HGET', KEYS[1], 'trim') or '-1')
for i = 1, #ARGV do
  local hi = tonumber(redis.call('HGET', KEYS[1], ARGV[i]) or '-1')
  if hi > trim then trim = hi end
  redis.call('HDEL', KEYS[1], ARGV[i])
  redis.call('DEL', KEYS[i + 1])
end
if trim >= 0 then
  redis.call('HSET', KEYS[1], 'trim', string.format('%d', trim))
end
return trim
