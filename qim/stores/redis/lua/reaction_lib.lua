-- The summary of one message as ARGV-named reader sees it: flat {emoji, count, mine, ...}
-- (docs/decisions/0121). counts_key: HASH emoji -> count; reactors_key: SET "<user>:<emoji>".
local function qim_reaction_summary(counts_key, reactors_key, reader)
  local flat = redis.call('HGETALL', counts_key)
  local out = {}
  for i = 1, #flat, 2 do
    local mine = redis.call('SISMEMBER', reactors_key, reader .. ':' .. flat[i])
    out[#out + 1] = flat[i]
    out[#out + 1] = flat[i + 1]
    out[#out + 1] = mine
  end
  return out
end
