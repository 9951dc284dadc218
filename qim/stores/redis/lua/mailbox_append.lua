-- append every recipient's entry of one dispatch (idempotent: same member, same score).
-- KEYS: 1 shard watermark (the fence), then pairs (day bucket, day index) per recipient.
-- ARGV: 1 offset, 2 index ttl s, 3 owner_epoch fence, 4 day, 5 the buckets' expire_at
-- (one record has one day), then one member per recipient.
--#include mailbox_lib
qim_fenced(KEYS[1], ARGV[3])
for i = 2, #KEYS, 2 do
  qim_append(KEYS[i], KEYS[i + 1], ARGV[6 + (i - 2) / 2], ARGV[1], ARGV[4], ARGV[5], ARGV[2])
end
return (#KEYS - 1) / 2
