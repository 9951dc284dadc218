-- notify_badge (docs/decisions/0135): the highest UserBadgeState version sent to each of a
-- user's devices, so that a late push never carries an older badge than one the device
-- was already sent. KEYS: 1 the user's HASH device -> "<version>:<badge>".
-- ARGV: 1 "1" for silent badge updates, "0" for alerts; then triples (device, version,
-- badge). Per device returns "1" (send with the given badge; recorded) or, for an alert
-- whose version is older than the recorded one, the recorded "<version>:<badge>" (send
-- that newer badge), or "0" for a silent update not newer than the recorded one (skip).
local silent = ARGV[1] == '1'
local out = {}
for i = 2, #ARGV, 3 do
  local device, version, badge = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  local stored = redis.call('HGET', KEYS[1], device)
  local stored_v = -1
  if stored then
    stored_v = tonumber(string.match(stored, '^(%d+):'))
  end
  if silent and stored_v >= version then
    out[#out + 1] = '0'
  elseif (not silent) and stored_v > version then
    out[#out + 1] = stored
  else
    if version > stored_v then
      redis.call('HSET', KEYS[1], device, version .. ':' .. badge)
    end
    out[#out + 1] = '1'
  end
end
redis.call('PEXPIRE', KEYS[1], 2592000000)
return out
