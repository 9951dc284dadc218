-- group_change (DESIGN.md §7): a membership change and its CONTROL message in one call.
-- The message takes conversation_seq J; joiners get joined_at = J-1 (initial members 0),
-- leavers left_at = J. The new member snapshot of the new version is stored (immutable).
-- KEYS: 1..5 as reserve_and_record, 6 group meta, 7 group members, 8 snapshot of the new version
-- ARGV: 1..7 as reserve_and_record, 8 op ("create" | "edit"), 9 expected version ("" for
--       create), 10 actor user id, 11 new snapshot bytes, 12 new member count,
--       13 snapshot ttl s, 14 group_id, then "+<user>" (join) / "-<user>" (leave) items.
-- Errors: QIM_CONFLICT (group exists / cmid reused), QIM_NOT_FOUND (no group),
-- QIM_MEMBERSHIP_CHANGED (version moved: re-plan).
--#include commit_lib
local existing = qim_existing(KEYS[1], ARGV[1])
if existing then return existing end
local version = 1
if ARGV[8] == 'create' then
  if redis.call('EXISTS', KEYS[6]) == 1 then
    error({err = 'QIM_CONFLICT group already exists'})
  end
else
  local ver = redis.call('HGET', KEYS[6], 'ver')
  if not ver then
    error({err = 'QIM_NOT_FOUND no such group'})
  end
  if ver ~= ARGV[9] then
    error({err = 'QIM_MEMBERSHIP_CHANGED membership version moved'})
  end
  version = tonumber(ver) + 1
end
local out, j = qim_record(KEYS, ARGV)
for i = 15, #ARGV do
  local user = string.sub(ARGV[i], 2)
  if string.sub(ARGV[i], 1, 1) == '+' then
    local joined = 0
    if ARGV[8] ~= 'create' then joined = j - 1 end
    redis.call('HSET', KEYS[7], user, string.format('%d:0', joined))
  else
    local m = redis.call('HGET', KEYS[7], user) or '0:0'
    local joined = string.match(m, '^(%d+):')
    redis.call('HSET', KEYS[7], user, joined .. ':' .. string.format('%d', j))
  end
end
redis.call('HSET', KEYS[6], 'ver', string.format('%d', version), 'count', ARGV[12])
if ARGV[8] == 'create' then
  redis.call('HSET', KEYS[6], 'gid', ARGV[14], 'owner', ARGV[10], 'cat', ARGV[3])
end
redis.call('SET', KEYS[8], ARGV[11], 'EX', tonumber(ARGV[13]))
return out
