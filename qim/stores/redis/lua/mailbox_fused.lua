-- Fused begin → append → finish for a fresh single-recipient dispatch (docs/design.md §5.4),
-- one round trip. A resumed or duplicate dispatch takes the step-wise path's logic too.
-- KEYS: 1 DispatchProgress, 2 DP index, 3 shard watermark, 4 day bucket, 5 day index
-- ARGV: 1 digest, 2 offset, 3 mailbox_seq, 4 expected blob, 5 new blob, 6 epoch,
--       7 member, 8 day, 9 expire_at, 10 index ttl s, 11 writer ("" = none),
--       12 owner_epoch fence (checked against KEYS[3] before anything is written)
-- Returns {status, mailbox_seq}; status RECOVERED when this writer had already finished
-- this very call (its reply was lost), else FRESH | RESUME | DUPLICATE of begin.
--#include mailbox_lib
qim_fenced(KEYS[3], ARGV[12])
local status, seq = qim_begin(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
if status ~= 'DUPLICATE' then
  -- the member was built with this record's mailbox_seq; a RESUME reuses the first one,
  -- which is the same record at the same offset, so the member is identical.
  qim_append(KEYS[4], KEYS[5], ARGV[7], ARGV[2], ARGV[8], ARGV[9], ARGV[10])
end
if qim_finish(KEYS[1], KEYS[3], ARGV[4], ARGV[5], ARGV[6], ARGV[11]) == 0 then
  status = 'RECOVERED'
end
return {status, seq}
