-- badge_settle (docs/decisions/0129): UserBadgeState. Write the absolute per-conversation
-- contributions a settler computed from canonical history for one user, recompute the
-- user's badge from them and raise its version when the badge changed (a user never
-- counted is badge 0 at version 0: a first settle at 0 changes nothing), then drop the
-- dirty marks it settled, each only if no registration marked it again meanwhile (its
-- generation unchanged: a newer mark is settled by the next round). Fenced like the
-- projection: the session shard's checkpoint must still carry the settler's owner_epoch.
-- A conversation muted until a time is queued in the wake ZSET at that time: the
-- settler marks it dirty again then (its contribution changes with no event).
-- A badge that fell is recorded in the fell HASH (KEYS[5], when given): member
-- "<tenant hex>:<user>" -> the new version; the NotificationService sends the user's
-- offline devices a silent badge update from it and drops it (decision 0135).
-- KEYS: 1 checkpoint HASH of the user's session shard, 2 dirty HASH, 3 badge HASH,
--       4 wake ZSET, 5 (optional) fell HASH
-- ARGV: 1 owner_epoch, 2 number n of conversations, 3 the user's dirty member prefix
--       "<tenant hex>:<user>:", then n triples (conversation hex, contribution, wake at
--       ms since the epoch or 0), then pairs (dirty member, generation read)
-- Returns {badge, version, 1 when this call changed the badge else 0}.
local oe = redis.call('HGET', KEYS[1], 'oe') or '0'
if oe ~= ARGV[1] then
  error({err = 'QIM_NOT_OWNER owner_epoch ' .. ARGV[1] .. ' is stale: fenced at ' .. oe})
end
local n = tonumber(ARGV[2])
local delta = 0
for i = 0, n - 1 do
  local conv, value, wake = ARGV[4 + 3 * i], tonumber(ARGV[5 + 3 * i]), ARGV[6 + 3 * i]
  if wake ~= '0' then
    redis.call('ZADD', KEYS[4], wake, ARGV[3] .. conv)
  end
  local old = tonumber(redis.call('HGET', KEYS[3], 'c:' .. conv) or '0')
  if value == 0 then
    redis.call('HDEL', KEYS[3], 'c:' .. conv)
  else
    redis.call('HSET', KEYS[3], 'c:' .. conv, value)
  end
  delta = delta + value - old
end
local badge = tonumber(redis.call('HGET', KEYS[3], 'b') or '0') + delta
local version, changed = nil, 0
if delta ~= 0 then
  redis.call('HSET', KEYS[3], 'b', badge)
  version = redis.call('HINCRBY', KEYS[3], 'v', 1)
  changed = 1
  if delta < 0 and KEYS[5] then
    redis.call('HSET', KEYS[5], string.sub(ARGV[3], 1, -2), version)
  end
else
  version = tonumber(redis.call('HGET', KEYS[3], 'v') or '0')
end
for a = 4 + 3 * n, #ARGV, 2 do
  if redis.call('HGET', KEYS[2], ARGV[a]) == ARGV[a + 1] then
    redis.call('HDEL', KEYS[2], ARGV[a])
  end
end
return {badge, version, changed}
