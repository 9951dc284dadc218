-- PushRegistrationStore.unregister / remove (docs/decisions/0128): remove one device's
-- registration, only while its token digest is ARGV[2] when that is not "" (a provider's
-- 410 for an old token must not remove a re-registration that raced it). The version
-- grows only when something was removed; the HASH keeps `v` so it never goes back.
-- KEYS: 1 the user's push HASH
-- ARGV: 1 device_id, 2 the expected token digest ("" = any)
-- Returns {removed 0|1, the version after}.
local tk = 't:' .. ARGV[1]
if ARGV[2] ~= '' and redis.call('HGET', KEYS[1], tk) ~= ARGV[2] then
  return {0, tonumber(redis.call('HGET', KEYS[1], 'v') or '0')}
end
local n = redis.call('HDEL', KEYS[1], ARGV[1], tk)
if n == 0 then
  return {0, tonumber(redis.call('HGET', KEYS[1], 'v') or '0')}
end
return {1, redis.call('HINCRBY', KEYS[1], 'v', 1)}
