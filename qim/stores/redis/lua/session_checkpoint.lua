-- session_checkpoint (seed 000: qsession checkpoint bound to cluster_id + topic_id +
-- partition count): the durable projection's own position in the dispatch partition of
-- one session shard, fenced by the shard owner's owner_epoch
-- (docs/decisions/0040-scale-leases-and-fencing.md).
-- KEYS: 1 checkpoint HASH (bind = "<cluster>|<topic_id>|<partitions>", p = next offset,
--       oe = owner_epoch of the owner that fenced it last, tn = the tenure: a token
--       of the acquisition that bound it last); init only: 2 the checkpoint of the
--       layout before shard leases (a single node's, one field per partition)
-- ARGV: 1 "init" | "advance", 2 binding, 3 shard (for messages), 4 owner_epoch, then
--   init:    5 the field of this partition in KEYS[2], 6 the tenure token ("" none).
--            Fences the shard at ARGV[4] (QIM_NOT_OWNER when a higher epoch is there),
--            names this acquisition in tn (issue 33: an owner that lost the shard and
--            took it back keeps its owner_epoch, so the epoch alone cannot tell a late
--            write of its earlier tenure from one of this one) and creates the checkpoint
--            when absent: at the old layout's offset when it has one under the same
--            binding (an upgrade resumes, never replays from 0), else at 0;
--            returns {"NEW" | "OK", offset} or {"MISMATCH", stored binding}
--   advance: 5 expected next offset, 6 new next offset, 7 the tenure token ("" not
--            checked), compare-and-set; a stale fence or tenure (QIM_NOT_OWNER), a
--            different binding or offset (QIM_CKPT_*) means another writer: error.
local oe = tonumber(redis.call('HGET', KEYS[1], 'oe') or '0')
local bind = redis.call('HGET', KEYS[1], 'bind')
if ARGV[1] == 'init' then
  if oe > tonumber(ARGV[4]) then
    error({err = 'QIM_NOT_OWNER shard=' .. ARGV[3] .. ' owner_epoch ' .. ARGV[4] .. ' is stale: fenced at ' .. oe})
  end
  redis.call('HSET', KEYS[1], 'oe', ARGV[4])
  if ARGV[6] and ARGV[6] ~= '' then
    redis.call('HSET', KEYS[1], 'tn', ARGV[6])
  else
    redis.call('HDEL', KEYS[1], 'tn')
  end
  if not bind then
    local start = '0'
    if KEYS[2] and redis.call('HGET', KEYS[2], 'bind') == ARGV[2] then
      start = redis.call('HGET', KEYS[2], ARGV[5]) or '0'
    end
    redis.call('HSET', KEYS[1], 'bind', ARGV[2], 'p', start)
    return {'NEW', start}
  elseif bind ~= ARGV[2] then
    return {'MISMATCH', bind}
  end
  local off = redis.call('HGET', KEYS[1], 'p')
  if not off then
    error({err = 'QIM_CKPT_CORRUPT shard ' .. ARGV[3] .. ' has no offset'})
  end
  return {'OK', off}
end
if tostring(oe) ~= ARGV[4] then
  error({err = 'QIM_NOT_OWNER shard=' .. ARGV[3] .. ' owner_epoch ' .. ARGV[4] .. ' is stale: fenced at ' .. oe})
end
if ARGV[7] and ARGV[7] ~= '' and redis.call('HGET', KEYS[1], 'tn') ~= ARGV[7] then
  error({err = 'QIM_NOT_OWNER shard=' .. ARGV[3] .. ' tenure is stale: the shard was acquired again'})
end
if bind ~= ARGV[2] then
  error({err = 'QIM_CKPT_BINDING shard=' .. ARGV[3] .. ' checkpoint rebound under us'})
end
if (redis.call('HGET', KEYS[1], 'p') or '') ~= ARGV[5] then
  error({err = 'QIM_CKPT_CONFLICT shard=' .. ARGV[3] .. ' checkpoint moved under us'})
end
redis.call('HSET', KEYS[1], 'p', ARGV[6])
return 'OK'
