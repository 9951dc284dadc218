-- state_change (recall / delete, docs/decisions/0005-groups-history.md): rewrite the target record with its
-- new state and no body (the row stays; no DELETE), mark its state key, and reserve the
-- CONTROL message that announces it, all in one call.
-- A target already trimmed from the hot tier (docs/decisions/0023; read from the archive, expected
-- version ""): its record is not written back to Redis; the state key is set (mailbox
-- pulls and reads of the archived row overlay it) and the target is listed in the
-- conversation's archived-states zset at the CONTROL message's seq, until the trim passes
-- that seq (the archiver has applied the state to the archive by then).
-- An edit (docs/decisions/0120) is the same call with state name "": the record is
-- rewritten (new body and version), no state key is set.
-- A recall of an edited message also blanks the CONTROL messages that announced its
-- edits (they carry its earlier bodies): each extra (record key, state key) pair is
-- rewritten when still in Redis and marked like the target (the archived-states zset
-- when trimmed, as for the target).
-- KEYS: 1..9 as reserve_and_record, 10 target record, 11 target state key,
--       12 group meta, 13 group members (groups only), 14 archived-states zset,
--       15.. pairs (record key, state key) of the edit CONTROL messages
-- ARGV: 1..10 as reserve_and_record, 11 sha1 of the target record as read ("" = read
--       from the archive), 12 new target record bytes, 13 state name ("" = an edit),
--       14 expected membership version ("" = no group check), 15 actor user id,
--       16 target message_id hex, then per extra pair: new record bytes, message_id hex
-- Errors: QIM_CONFLICT, QIM_RECORD_CHANGED (re-read and retry), group check errors,
-- the checks of qim_reserve_checks.
--#include commit_lib
local existing = qim_existing(KEYS, ARGV)
if existing then return existing end
local current = redis.call('GET', KEYS[10])
local archived = ARGV[11] == ''
if archived then
  -- still in Redis (never trimmed) or already recalled/deleted: read again
  if current or redis.call('EXISTS', KEYS[11]) == 1 then
    error({err = 'QIM_RECORD_CHANGED target record changed'})
  end
elseif not current or redis.sha1hex(current) ~= ARGV[11] then
  error({err = 'QIM_RECORD_CHANGED target record changed'})
end
if ARGV[14] ~= '' then
  qim_group_check(KEYS[12], KEYS[13], ARGV[15], ARGV[14], ARGV[13] == '')  -- an edit: the mute refuses it (0127)
end
qim_reserve_checks(KEYS, ARGV)
if not archived then
  redis.call('SET', KEYS[10], ARGV[12])
end
if ARGV[13] ~= '' then
  redis.call('SET', KEYS[11], ARGV[13])
end
local out, seq = qim_record(KEYS, ARGV)
if archived then
  redis.call('ZADD', KEYS[14], seq, ARGV[16] .. ':' .. ARGV[13])
end
for i = 1, (#KEYS - 14) / 2 do
  local rk, sk = KEYS[13 + 2 * i], KEYS[14 + 2 * i]
  if redis.call('EXISTS', rk) == 1 then
    redis.call('SET', rk, ARGV[15 + 2 * i])
  else
    redis.call('ZADD', KEYS[14], seq, ARGV[16 + 2 * i] .. ':' .. ARGV[13])
  end
  redis.call('SET', sk, ARGV[13])
end
return out
