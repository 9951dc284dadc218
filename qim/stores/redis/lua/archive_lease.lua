-- archive_lease: take or renew a lease (one trimmer at a time among the writers).
-- KEYS: 1 lease STRING. ARGV: 1 holder token, 2 ttl ms. Returns 1 when held by the token.
local cur = redis.call('GET', KEYS[1])
if not cur or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
