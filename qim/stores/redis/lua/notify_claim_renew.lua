-- notify_claim_renew (docs/decisions/0144): just before an alert's request, its claim must
-- still be this attempt's, so a node paused (or waiting on a Retry-After) past its claim
-- sends nothing another node made meanwhile.
-- KEYS: 1 the alert's STRING. ARGV: 1 this attempt's claim token ("c..."), 2 the claim time (ms).
-- Returns 1 (the claim is this attempt's: its expiry made anew; also when it had expired
-- and nobody took it, taken again) or 0 (made already, "s", or another attempt's claim).
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] or v == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
