-- lease_renew: extend a lease only while we still own it (value = our token).
-- KEYS: 1 lease key. ARGV: 1 token, 2 ttl ms. Returns 1 when renewed, 0 when lost.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
