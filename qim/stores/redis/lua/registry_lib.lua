-- Shared functions of the ShardRegistry scripts (qim/stores/registry.py;
-- docs/decisions/0040-scale-leases-and-fencing.md). Every expiry is judged by the
-- registry's own clock (TIME), never by a caller's.

-- Registry time in unix ms.
local function qim_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- True while the node HASH at `node_key` is held by `inc` with an unexpired lease.
local function qim_node_held(node_key, inc, now)
  local cur = redis.call('HMGET', node_key, 'inc', 'exp')
  return cur[1] == inc and tonumber(cur[2] or '0') > now
end
