-- Shared functions of the SessionProjection scripts (DESIGN.md §6); included, never
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
