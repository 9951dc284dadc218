-- lease_renew: extend a lease only while we still own it (value = our token). The writer
-- also publishes its HLC issue ceiling here (once a second, no extra round trip): the
-- cluster high-water only grows (docs/design.md §3, docs/decisions/0017).
-- KEYS: 1 lease key, 2 cluster high-water key (optional)
-- ARGV: 1 token, 2 ttl ms, 3 issue ceiling ms (with KEYS 2)
-- Returns 1 when renewed (and the ceiling published), 0 when lost.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if KEYS[2] then
    local cluster = tonumber(redis.call('GET', KEYS[2]) or '0')
    if tonumber(ARGV[3]) > cluster then
      redis.call('SET', KEYS[2], ARGV[3])
    end
  end
  return 1
end
return 0
