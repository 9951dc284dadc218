-- notify_fell_done (docs/decisions/0135): drop entries of the badge-fell HASH whose value
-- (the badge version that fell) is still the one the NotificationService handled; a newer
-- fall written meanwhile stays for the next round.
-- KEYS: 1 the fell HASH. ARGV: pairs (member, version read). Returns how many were dropped.
local n = 0
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', KEYS[1], ARGV[i])
    n = n + 1
  end
end
return n
