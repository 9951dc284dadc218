-- session_checkpoint (seed 000: qsession checkpoint bound to cluster_id + topic_id +
-- partition count): the durable projection's own position in the dispatch log.
-- KEYS: 1 checkpoint HASH (bind = "<cluster>|<topic_id>|<partitions>", p<N> = next offset)
-- ARGV: 1 "init" | "advance", 2 binding, then
--   init:    3 partition count -> creates the checkpoint at offset 0 when absent;
--            returns {"NEW" | "OK", offsets...} or {"MISMATCH", stored binding}
--   advance: (field, expected next offset, new next offset) triples, compare-and-set;
--            a different binding or offset means another owner: error, fail closed.
local bind = redis.call('HGET', KEYS[1], 'bind')
if ARGV[1] == 'init' then
  local n = tonumber(ARGV[3])
  local status = 'OK'
  if not bind then
    redis.call('HSET', KEYS[1], 'bind', ARGV[2])
    for p = 0, n - 1 do
      redis.call('HSET', KEYS[1], 'p' .. p, '0')
    end
    status = 'NEW'
  elseif bind ~= ARGV[2] then
    return {'MISMATCH', bind}
  end
  local out = {status}
  for p = 0, n - 1 do
    local off = redis.call('HGET', KEYS[1], 'p' .. p)
    if not off then
      error({err = 'QIM_CKPT_CORRUPT partition ' .. p .. ' missing'})
    end
    out[#out + 1] = off
  end
  return out
end
if bind ~= ARGV[2] then
  error({err = 'QIM_CKPT_BINDING checkpoint rebound under us'})
end
for i = 3, #ARGV, 3 do
  if (redis.call('HGET', KEYS[1], ARGV[i]) or '') ~= ARGV[i + 1] then
    error({err = 'QIM_CKPT_CONFLICT checkpoint moved under us'})
  end
end
for i = 3, #ARGV, 3 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
end
return 'OK'
