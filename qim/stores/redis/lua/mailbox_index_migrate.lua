-- Move a day index of the old layout (a HASH: day -> highest offset, "trim") into the
-- sorted set that replaced it (docs/decisions/0064-day-index-sorted-set.md). Atomic:
-- appends write only the sorted set, and ZADD GT keeps the higher offset of each day.
-- KEYS: 1 day index (ZSET), 2 the old HASH. The sorted set keeps the later of the two
-- expiries. Returns the number of fields moved (0: nothing to move).
local old = redis.call('HGETALL', KEYS[2])
if #old == 0 then
  return 0
end
for i = 1, #old, 2 do
  redis.call('ZADD', KEYS[1], 'GT', old[i + 1], old[i])
end
local ttl = redis.call('PTTL', KEYS[2])
if ttl > 0 and redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
redis.call('DEL', KEYS[2])
return #old / 2
