-- Shared functions of the SessionProjection scripts (docs/design.md §6); included, never
-- loaded alone.

-- read_conversation_seq only moves forward (per user, shared by devices). Returns the
-- absolute value after the call and 1 when it moved, else 0.
local function qim_read_forward(read_key, conv, seq)
  local cur = tonumber(redis.call('HGET', read_key, conv) or '0')
  if tonumber(seq) > cur then
    redis.call('HSET', read_key, conv, seq)
    return seq, 1
  end
  return string.format('%d', cur), 0
end

-- The registration of one (user, conversation) by both projection paths: every write is
-- order-independent (ZADD GT, forward-only read, HSETNX), so the paths may arrive in any
-- order and any number of times with the same result. `pending` (nil without the
-- archive tier) queues a first registration for CQL under `member`. Returns 1 when the
-- conversation is new for the user, else 0.
local function qim_register(convs, read, peers, pending, conv, created_ms, own_seq, peer, member, dirty, dmember)
  local added = redis.call('ZADD', convs, 'GT', created_ms, conv)
  -- UserBadgeState (docs/decisions/0129): the user's badge for this conversation is to be
  -- settled again; marked in the same script as the registration (and the checkpoint)
  redis.call('HINCRBY', dirty, dmember, 1)
  if own_seq ~= '0' then
    -- sending marks the conversation read up to the sent message
    qim_read_forward(read, conv, own_seq)
  end
  local peer_new = 0
  if peer ~= '0' then
    peer_new = redis.call('HSETNX', peers, conv, peer)
  end
  if (added == 1 or peer_new == 1) and pending then
    -- first time in the set, or its direct peer just learnt: queued for the durable list
    -- (drained into CQL user_conversation_state by the session node)
    redis.call('ZADD', pending, 'NX', created_ms, member)
  end
  return added
end
