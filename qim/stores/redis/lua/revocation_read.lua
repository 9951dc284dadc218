-- RevocationStore.cutoffs (qim/stores/redis/revocations.py) for one device at AUTH: the
-- newer of its own cutoff and its user's (unix s, 0: nothing revoked). A script so that
-- the logins of one event-loop turn share one pipelined round trip over the lean
-- connection (Scripts coalesce; issue 41, logins per second).
-- KEYS: 1 the device's revocation key, 2 the user's (device 0). Returns the cutoff.
local own = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local user = tonumber(redis.call('GET', KEYS[2]) or '0') or 0
return math.max(own, user)
