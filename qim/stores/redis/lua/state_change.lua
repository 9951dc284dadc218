-- state_change (recall / delete, DESIGN.md issue 6): rewrite the target record with its
-- new state and no body (the row stays; no DELETE), mark its state key, and reserve the
-- CONTROL message that announces it, all in one call.
-- KEYS: 1..9 as reserve_and_record, 10 target record, 11 target state key,
--       12 group meta, 13 group members (groups only)
-- ARGV: 1..11 as reserve_and_record, 12 sha1 of the target record as read, 13 new target
--       record bytes, 14 state name, 15 expected membership version ("" = no group
--       check), 16 actor user id
-- Errors: QIM_CONFLICT, QIM_RECORD_CHANGED (re-read and retry), group check errors,
-- the checks of qim_reserve_checks.
--#include commit_lib
local existing = qim_existing(KEYS, ARGV)
if existing then return existing end
local current = redis.call('GET', KEYS[10])
if not current or redis.sha1hex(current) ~= ARGV[12] then
  error({err = 'QIM_RECORD_CHANGED target record changed'})
end
if ARGV[15] ~= '' then
  qim_group_check(KEYS[12], KEYS[13], ARGV[16], ARGV[15])
end
qim_reserve_checks(KEYS, ARGV)
redis.call('SET', KEYS[10], ARGV[13])
redis.call('SET', KEYS[11], ARGV[14])
local out = qim_record(KEYS, ARGV)
return out
