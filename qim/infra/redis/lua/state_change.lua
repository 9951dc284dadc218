-- state_change (recall / delete, DESIGN.md issue 6): rewrite the target record with its
-- new state and no body (the row stays; no DELETE), mark its state key, and reserve the
-- CONTROL message that announces it, all in one call.
-- KEYS: 1..5 as reserve_and_record, 6 target record, 7 target state key,
--       8 group meta, 9 group members (groups only)
-- ARGV: 1..7 as reserve_and_record, 8 sha1 of the target record as read, 9 new target
--       record bytes, 10 state name, 11 expected membership version ("" = no group
--       check), 12 actor user id
-- Errors: QIM_CONFLICT, QIM_RECORD_CHANGED (re-read and retry), group check errors.
--#include commit_lib
local existing = qim_existing(KEYS[1], ARGV[1])
if existing then return existing end
local current = redis.call('GET', KEYS[6])
if not current or redis.sha1hex(current) ~= ARGV[8] then
  error({err = 'QIM_RECORD_CHANGED target record changed'})
end
if ARGV[11] ~= '' then
  qim_group_check(KEYS[8], KEYS[9], ARGV[12], ARGV[11])
end
redis.call('SET', KEYS[6], ARGV[9])
redis.call('SET', KEYS[7], ARGV[10])
local out = qim_record(KEYS, ARGV)
return out
