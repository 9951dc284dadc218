-- Remove entries of the one day bucket that straddles the retention cutoff once a read
-- found them past it, and raise the persisted trim boundary (docs/design.md §5.5;
-- docs/decisions/0013-mailbox-retention-ms.md). Whole days go by mailbox_trim.
-- KEYS: 1 day index (ZSET, member "trim": decisions/0064), 2 day bucket.
-- ARGV: 1 highest removed log offset, then the members.
-- Returns the trim boundary. Idempotent: a member already gone is ignored.
--#include mailbox_lib
qim_index_migrate(KEYS[1])  -- an old node may have created a HASH since the read (decisions/0064)
redis.call('ZADD', KEYS[1], 'GT', ARGV[1], 'trim')
local trim = tonumber(redis.call('ZSCORE', KEYS[1], 'trim'))
if #ARGV > 1 then
  redis.call('ZREM', KEYS[2], unpack(ARGV, 2))
end
return trim
