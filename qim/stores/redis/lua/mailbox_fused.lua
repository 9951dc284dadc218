-- Fused begin → append → finish of one dispatch (docs/design.md §5.4), one round trip for
-- every recipient of the record (a direct message's one, a group shard's many). A resumed
-- or duplicate dispatch takes the step-wise path's logic too.
-- KEYS: 1 DispatchProgress, 2 DP index, 3 shard watermark, then pairs (day bucket, day
--       index) per recipient
-- ARGV: 1 digest, 2 offset, 3 mailbox_seq, 4 expected blob, 5 new blob, 6 epoch,
--       7 index ttl s, 8 writer ("" = none), 9 owner_epoch fence (checked against KEYS[3]
--       before anything is written), 10 day, 11 the buckets' expire_at (one record has
--       one day), then one member per recipient; every member starts with the 8 bytes
--       of ARGV[3]
-- Returns {status, mailbox_seq}; status RECOVERED when this writer had already finished
-- this very call (its reply was lost), else FRESH | RESUME | DUPLICATE of begin.
--#include mailbox_lib
qim_fenced(KEYS[3], ARGV[9])
local status, seq = qim_begin(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
if status ~= 'DUPLICATE' then
  -- a RESUME appends with the first attempt's mailbox_seq (the entries are idempotent
  -- only with the same member): the members' first 8 bytes are replaced when it differs
  local reseq = seq ~= ARGV[3]
  for i = 4, #KEYS, 2 do
    local member = ARGV[12 + (i - 4) / 2]
    if reseq then
      member = seq .. string.sub(member, 9)
    end
    qim_append(KEYS[i], KEYS[i + 1], member, ARGV[2], ARGV[10], ARGV[11], ARGV[7])
  end
end
if qim_finish(KEYS[1], KEYS[3], ARGV[4], ARGV[5], ARGV[6], ARGV[8]) == 0 then
  status = 'RECOVERED'
end
return {status, seq}
