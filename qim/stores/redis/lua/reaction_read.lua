-- The summaries of several messages of one conversation (ReactionStore.summaries;
-- docs/decisions/0121). KEYS: counts, reactors of message 1, then of message 2, ...
-- ARGV[1]: the reader's user id. Returns one flat summary (reaction_lib: its version first,
-- the version field itself never among the emoji) per message.
--#include reaction_lib
local out = {}
for i = 1, #KEYS, 2 do
  out[#out + 1] = qim_reaction_summary(KEYS[i], KEYS[i + 1], ARGV[1])
end
return out
