-- group_change (docs/design.md §7): a membership change and its CONTROL message in one call.
-- The message takes conversation_seq J; joiners get joined_at = J-1 (initial members 0),
-- leavers left_at = J. A member's value is its list of intervals, oldest first,
-- "j1:l1,j2:l2,...,jn:ln" (ln = 0 while a member): a re-join appends an interval, at most
-- ARGV 18 are kept (the oldest is dropped). The new member snapshot of the new version
-- is stored (immutable). The group's title (meta field "title") is set on create and by
-- op "title", which changes nothing else: no member, no version, no snapshot (its
-- CONTROL message goes to the members of the expected version, so a version that moved
-- re-plans it like an edit).
-- KEYS: 1..9 as reserve_and_record, 10 group meta, 11 group members, 12 snapshot of the
--       new version
-- ARGV: 1..10 as reserve_and_record, 11 op ("create" | "edit" | "title"), 12 expected
--       version ("" for create), 13 actor user id, 14 new snapshot bytes, 15 new member
--       count, 16 snapshot ttl s, 17 group_id, 18 intervals kept per member, 19 title,
--       then "+<user>" (join) / "-<user>" (leave) items.
-- Errors: QIM_CONFLICT (group exists / cmid reused), QIM_NOT_FOUND (no group),
-- QIM_MEMBERSHIP_CHANGED (version moved: re-plan), the checks of qim_reserve_checks.
--#include commit_lib
local existing = qim_existing(KEYS, ARGV)
if existing then return existing end
local version = 1
if ARGV[11] == 'create' then
  if redis.call('EXISTS', KEYS[10]) == 1 then
    error({err = 'QIM_CONFLICT group already exists'})
  end
else
  local ver = redis.call('HGET', KEYS[10], 'ver')
  if not ver then
    error({err = 'QIM_NOT_FOUND no such group'})
  end
  if ver ~= ARGV[12] then
    error({err = 'QIM_MEMBERSHIP_CHANGED membership version moved'})
  end
  version = tonumber(ver) + 1
end
qim_reserve_checks(KEYS, ARGV)
local out, j = qim_record(KEYS, ARGV)
if ARGV[11] == 'title' then
  redis.call('HSET', KEYS[10], 'title', ARGV[19])
  return out
end
local keep = tonumber(ARGV[18])
for i = 20, #ARGV do
  local user = string.sub(ARGV[i], 2)
  local m = redis.call('HGET', KEYS[11], user)
  if string.sub(ARGV[i], 1, 1) == '+' then
    local joined = 0
    if ARGV[11] ~= 'create' then joined = j - 1 end
    local interval = string.format('%d:0', joined)
    if m and not string.find(m, ':0$') then
      -- a re-join: keep the earlier intervals (history of every period stays visible)
      local parts = {}
      for p in string.gmatch(m, '[^,]+') do parts[#parts + 1] = p end
      parts[#parts + 1] = interval
      while #parts > keep do table.remove(parts, 1) end
      redis.call('HSET', KEYS[11], user, table.concat(parts, ','))
    elseif not m then
      redis.call('HSET', KEYS[11], user, interval)
    end
  else
    local left = string.format('%d', j)
    if not m then
      redis.call('HSET', KEYS[11], user, '0:' .. left)
    elseif string.find(m, ':0$') then
      redis.call('HSET', KEYS[11], user, string.sub(m, 1, #m - 1) .. left)
    end
  end
end
redis.call('HSET', KEYS[10], 'ver', string.format('%d', version), 'count', ARGV[15])
if ARGV[11] == 'create' then
  redis.call('HSET', KEYS[10], 'gid', ARGV[17], 'owner', ARGV[13], 'cat', ARGV[3], 'title', ARGV[19])
end
redis.call('SET', KEYS[12], ARGV[14], 'EX', tonumber(ARGV[16]))
return out
