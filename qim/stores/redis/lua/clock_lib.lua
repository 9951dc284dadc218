-- Redis's own clock, for every time a script stores that another process judges later
-- (the in-flight index CommitRecovery scans, the `upd` field of a commit). A time from
-- the caller's clock would be judged by another host's clock; an expiry is always
-- relative (PEXPIRE / SET PX), never an absolute time from a caller (docs/decisions/0032).
-- Included, never loaded alone.

-- Redis's clock in unix ms, as a decimal string (HSET and ZADD take it as it is).
local function qim_now_ms()
  local t = redis.call('TIME')
  return string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
end
