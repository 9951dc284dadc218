-- Remove entries of the one day bucket that straddles the retention cutoff once a read
-- found them past it, and raise the persisted trim boundary (docs/design.md §5.5;
-- docs/decisions/0013-mailbox-retention-ms.md). Whole days go by mailbox_trim.
-- KEYS: 1 day index, 2 day bucket. ARGV: 1 highest removed log offset, then the members.
-- Returns the trim boundary. Idempotent: a member already gone is ignored.
local trim = tonumber(redis.call('HGET', KEYS[1], 'trim') or '-1')
local hi = tonumber(ARGV[1])
if hi > trim then
  trim = hi
  redis.call('HSET', KEYS[1], 'trim', string.format('%d', trim))
end
if #ARGV > 1 then
  redis.call('ZREM', KEYS[2], unpack(ARGV, 2))
end
return trim
