-- The summary of one message as ARGV-named reader sees it: flat {version, emoji, count,
-- mine, ...} (docs/decisions/0121, amended: versions). counts_key: HASH emoji -> count plus
-- the field VERSION_FIELD, the message's summary version (+1 per change, in the same
-- atomic call: reaction_change.lua); its name starts with a NUL, which no emoji can hold
-- (qim/wire/reaction.py refuses control characters), so it is never an emoji.
-- reactors_key: SET "<user>:<emoji>".
local VERSION_FIELD = '\0version'
local function qim_reaction_summary(counts_key, reactors_key, reader)
  local flat = redis.call('HGETALL', counts_key)
  local out = {0}
  for i = 1, #flat, 2 do
    if flat[i] == VERSION_FIELD then
      out[1] = tonumber(flat[i + 1])
    else
      local mine = redis.call('SISMEMBER', reactors_key, reader .. ':' .. flat[i])
      out[#out + 1] = flat[i]
      out[#out + 1] = flat[i + 1]
      out[#out + 1] = mine
    end
  end
  return out
end
