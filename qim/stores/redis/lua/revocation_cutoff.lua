-- RevocationStore.revoke on one core instance (docs/decisions/0100): keep the newer of
-- the stored cutoff and ARGV[1] (unix s), atomically (two revokes racing never lower
-- it), and set the TTL ARGV[2] (s). KEYS[1]: the revocation key. Returns the cutoff kept.
local old = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local cutoff = math.max(old, tonumber(ARGV[1]))
redis.call('SET', KEYS[1], string.format('%d', cutoff), 'EX', tonumber(ARGV[2]))
return cutoff
