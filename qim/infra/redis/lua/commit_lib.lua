-- Shared functions of the commit scripts (DESIGN.md §5.2). Included by
-- reserve_and_record, reserve_group_send, group_change and state_change; never loaded
-- alone. Errors are raised as {err = "QIM_<REASON> ..."}.

-- Idempotency on (tenant, sender, cmid): an existing commit hash with the same identity
-- digest is returned as {"EXISTING", state, message_id, conversation_seq, created_at};
-- another digest is CONFLICT. nil when absent.
local function qim_existing(commit_key, digest)
  local e = redis.call('HMGET', commit_key, 'dg', 'st', 'mid', 'cseq', 'cat')
  if e[1] then
    if e[1] ~= digest then
      error({err = 'QIM_CONFLICT client_message_id reused with other content'})
    end
    return {'EXISTING', e[2], e[3], e[4], e[5]}
  end
  return nil
end

local function qim_varint(n)
  local out = {}
  while n >= 128 do
    out[#out + 1] = string.char(n % 128 + 128)
    n = math.floor(n / 128)
  end
  out[#out + 1] = string.char(n)
  return table.concat(out)
end

-- A group actor must be a current member (left_at 0) and the membership version the
-- caller planned with must still be the group's.
local function qim_group_check(meta_key, members_key, actor, expected_version)
  local m = redis.call('HGET', members_key, actor)
  if not m or not string.find(m, ':0$') then
    error({err = 'QIM_FORBIDDEN not a member of the group'})
  end
  if redis.call('HGET', meta_key, 'ver') ~= expected_version then
    error({err = 'QIM_MEMBERSHIP_CHANGED membership version moved'})
  end
end

-- INCR conversation_seq, store the canonical record (field 4 = seq appended: protobuf
-- keeps the last value), the history index and the commit hash; register in-flight.
-- split = "1" (fault injection) stops at RESERVED with the record in the commit hash.
-- k = {commit, seq, record, history, inflight}; a = {digest, mid, cat, prefix, audience, now, split}
local function qim_record(k, a)
  local seq = redis.call('INCR', k[2])
  local record = a[4] .. string.char(0x20) .. qim_varint(seq)
  local seqs = string.format('%d', seq)
  local state = 'RECORDED'
  redis.call('HSET', k[1], 'dg', a[1], 'mid', a[2], 'cseq', seqs, 'cat', a[3], 'aud', a[5], 'upd', a[6])
  if a[7] == '1' then
    state = 'RESERVED'
    redis.call('HSET', k[1], 'st', state, 'rec', record)
  else
    redis.call('SET', k[3], record)
    redis.call('ZADD', k[4], seq, a[2])
    redis.call('HSET', k[1], 'st', state)
  end
  redis.call('ZADD', k[5], a[6], k[1])
  return {'FRESH', state, a[2], seqs, a[3]}, seq
end
