-- CommitStore.stale, its first step: the commit hashes of every in-flight ZSET last
-- updated before now - ARGV[1] ms (Redis's clock, as the reserve scored them), at most
-- ARGV[2] per ZSET, in one call (a pipeline of one ZRANGEBYSCORE per bucket cost every
-- writer ~2 ms of CPU a second while idle: the scan runs every second).
-- The keys carry one hash tag each ({bNNN}): one call over several needs the standalone
-- Redis the services require (Redis Cluster is refused at start). With several core
-- instances (decision 0096) the store makes one call per instance over its own buckets.
-- KEYS: the in-flight ZSETs of one instance, in bucket order. Returns {position
-- (1-based, into KEYS), commit key, ...}.
local t = redis.call('TIME')
local before = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
  local found = redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', before, 'LIMIT', 0, tonumber(ARGV[2]))
  for _, ck in ipairs(found) do
    out[#out + 1] = i
    out[#out + 1] = ck
  end
end
return out
