-- append every recipient's entry of one dispatch (idempotent: same member, same score).
-- KEYS: pairs (day bucket, day index) per recipient.
-- ARGV: 1 offset, 2 index ttl s, then triples (member, day, expire_at) per recipient.
--#include mailbox_lib
for i = 1, #KEYS, 2 do
  local j = 3 + (i - 1) / 2 * 3
  qim_append(KEYS[i], KEYS[i + 1], ARGV[j], ARGV[1], ARGV[j + 1], ARGV[j + 2], ARGV[2])
end
return #KEYS / 2
