-- PushRegistrationStore.put (docs/decisions/0128): one device's registration replaced
-- and the user's version raised, atomically.
-- KEYS: 1 the user's push HASH
-- ARGV: 1 device_id, 2 the registration's protobuf bytes, 3 the token's digest (hex)
-- Returns the version after.
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2], 't:' .. ARGV[1], ARGV[3])
return redis.call('HINCRBY', KEYS[1], 'v', 1)
