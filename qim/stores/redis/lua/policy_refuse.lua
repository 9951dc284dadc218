-- policy_refuse (docs/decisions/0099, Amendment): keep the send policy's refusal of one
-- send beside its commit keys, so a retry of the same (sender, cmid) gets the same
-- answer after a writer restart or failover (the reserve reads it: qim_refusal_check).
-- KEYS 1 the send's commit hash, 2 its kept-refusal hash (same commit bucket)
-- ARGV 1 identity digest (36 B), 2 the policy's reason, 3 how long to keep it (ms)
-- Returns {'COMMITTED'} when a commit of the send exists (an earlier acceptance stands,
-- nothing written), else {'REFUSED', reason} with the reason kept: an earlier refusal's
-- (the first answer stands) or this one's, written now with the TTL.
-- Errors: QIM_CONFLICT (a refusal of this cmid with another digest is kept).
if redis.call('EXISTS', KEYS[1]) == 1 then return {'COMMITTED'} end
local kept = redis.call('HMGET', KEYS[2], 'dg', 'why')
if kept[1] then
  if kept[1] ~= ARGV[1] then
    error({err = 'QIM_CONFLICT client_message_id reused with other content'})
  end
  return {'REFUSED', kept[2]}
end
redis.call('HSET', KEYS[2], 'dg', ARGV[1], 'why', ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return {'REFUSED', ARGV[2]}
