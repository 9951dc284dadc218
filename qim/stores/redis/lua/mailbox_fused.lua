-- Fused begin → append → finish of one or more consecutive dispatch records of one shard
-- (docs/design.md §5.4; docs/decisions/0003, 0061, 0067): one round trip for every
-- recipient of every record. Records are applied in offset order, as the step-wise path
-- would one after the other: each record's DispatchProgress is begun (a later record of
-- a dispatch begun earlier in the call is a DUPLICATE), the entries are gathered per
-- (user, day) bucket and written, then every record is marked DONE and W is written once,
-- for the last record. The watermark and the digests are checked before anything is
-- written.
-- KEYS: 1 shard watermark, 2 DP index, 3 .. K+2 DispatchProgress of each record, then
--       pairs (day bucket, day index), one per distinct (user, day) of the records
-- ARGV: 1 owner_epoch fence, 2 expected blob ("" = none yet), 3 new blob, 4 shard_epoch,
--       5 writer ("" = none), 6 index ttl s, 7 K, 8 U (the first U records are begun and
--       appended but not marked DONE: the records direct ones overtake, their members of
--       those lanes only, then the direct ones, each part in offset order: docs/decisions/
--       0142; 0 otherwise); then per record: digest, offset,
--       mailbox_seq (8 B), day, the bucket's expire_at, N, then N pairs (the number of
--       its (bucket, day index) pair in KEYS, counted from 1; member). Every member
--       starts with the record's mailbox_seq. Then, optionally (inline pushes, docs/
--       decisions/0156): M, then M pairs (pair number, offset): the user of that pair's
--       previous entry below that offset, read once every entry of the call is written.
-- Returns {written, status 1, mailbox_seq 1, ..., status K, mailbox_seq K, prev 1, ...,
-- prev M}; written is 1 when W was written now, 0 when this writer had already finished
-- this very call (its reply was lost: the caller reports RECOVERED). status: FRESH |
-- RESUME | DUPLICATE. prev: the highest offset below the asked one among the user's
-- entries (the trim boundary counts: a pull from it is served), -1 none, -2 unknown (a
-- day other than the pair's holds an offset at or above it: not read here).
--#include mailbox_lib
qim_fenced(KEYS[1], ARGV[1])
local write = qim_wm_check(KEYS[1], ARGV[2], ARGV[3], ARGV[5])
local records = tonumber(ARGV[7])
local first_pair = records + 3
-- Refusals before any write: a dispatch_id seen with another payload, stored or earlier
-- in this call (a script's writes are not undone by a later error).
local digest_of = {}
local a = 9
for r = 1, records do
  local dp, digest = KEYS[2 + r], ARGV[a]
  local known = digest_of[dp] or redis.call('HGET', dp, 'dg')
  if known and known ~= digest then
    error({err = 'QIM_DIGEST_CONFLICT dispatch_id seen with another payload at offset ' .. ARGV[a + 1]})
  end
  digest_of[dp] = digest
  a = a + 6 + 2 * tonumber(ARGV[a + 5])
end
local entries, newest, day_of, expire_of, begun = {}, {}, {}, {}, {}
local out = {write and 1 or 0}
a = 9
for r = 1, records do
  local digest, offset, seq8, day, expire_at = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local n = tonumber(ARGV[a + 5])
  a = a + 6
  local dp = KEYS[2 + r]
  local status, seq = qim_begin(dp, KEYS[2], digest, offset, seq8)
  if begun[dp] then
    status = 'DUPLICATE'  -- its dispatch was begun earlier in this call: done by the time it comes
  end
  begun[dp] = true
  if status ~= 'DUPLICATE' then
    -- a RESUME appends with the first attempt's mailbox_seq (the entries are idempotent
    -- only with the same member): the members' first 8 bytes are replaced when it differs
    local reseq = seq ~= seq8
    for i = a, a + 2 * n - 1, 2 do
      local p = tonumber(ARGV[i])
      local member = ARGV[i + 1]
      if reseq then
        member = seq .. string.sub(member, 9)
      end
      local t = entries[p]
      if t == nil then
        t = {}
        entries[p] = t
        day_of[p], expire_of[p] = day, expire_at
      end
      t[#t + 1] = offset
      t[#t + 1] = member
      if newest[p] == nil or tonumber(offset) > tonumber(newest[p]) then  -- records may come out of offset order (0142)
        newest[p] = offset
      end
    end
  end
  a = a + 2 * n
  out[#out + 1] = status
  out[#out + 1] = seq
end
for p = 1, (#KEYS - first_pair + 1) / 2 do
  local t = entries[p]
  if t ~= nil then
    local bucket = KEYS[first_pair + 2 * (p - 1)]
    redis.call('ZADD', bucket, unpack(t))
    redis.call('EXPIREAT', bucket, expire_of[p])
    qim_index_day(KEYS[first_pair + 2 * p - 1], newest[p], day_of[p], ARGV[6])
  end
end
-- DONE only once every entry is written: an error above leaves them begun (a replay
-- resumes them), never done without their entries
for r = tonumber(ARGV[8]) + 1, records do
  redis.call('HSET', KEYS[2 + r], 'st', 'DONE')
end
if write then
  redis.call('HSET', KEYS[1], 'blob', ARGV[3], 'layout', '1', 'epoch', ARGV[4], 'writer', ARGV[5])
end
-- previous positions, after every write: an overtake's records ahead (0142) have their
-- entries of these lanes in this very call, so nothing below the offset is missing
local asked = tonumber(ARGV[a] or '0')
for i = a + 1, a + 2 * asked, 2 do
  local p = tonumber(ARGV[i])
  out[#out + 1] = qim_prev_offset(KEYS[first_pair + 2 * (p - 1)], KEYS[first_pair + 2 * p - 1],
                                  day_of[p] or '', ARGV[i + 1])
end
return out
