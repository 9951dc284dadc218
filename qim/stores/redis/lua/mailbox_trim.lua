-- Trim expired day buckets of one user and persist the trim boundary (docs/design.md §5.5).
-- KEYS: 1 day index (ZSET, docs/decisions/0064-day-index-sorted-set.md), then one bucket
-- key per expired day. ARGV: the expired days.
-- The boundary (member "trim") is the highest log offset ever removed; a non-zero
-- cursor below it gets CURSOR_EXPIRED. Returns the boundary (-1: nothing removed).
--#include mailbox_lib
qim_index_migrate(KEYS[1])  -- an old node may have created a HASH since the read (decisions/0064)
local trim = tonumber(redis.call('ZSCORE', KEYS[1], 'trim') or '-1')
for i = 1, #ARGV do
  local hi = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[i]) or '-1')
  if hi > trim then trim = hi end
  redis.call('ZREM', KEYS[1], ARGV[i])
  redis.call('DEL', KEYS[i + 1])
end
if trim >= 0 then
  redis.call('ZADD', KEYS[1], 'GT', string.format('%d', trim), 'trim')
end
return trim
