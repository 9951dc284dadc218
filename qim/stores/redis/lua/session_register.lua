-- session_register (docs/design.md §6, seed 004 §6): the ONE registration script of both
-- projection paths (durable dispatch consumer and the mailbox's low-latency Projection),
-- for a batch of registrations in one call (docs/decisions/0062-registrations-in-one-call.md).
-- The writes are session_lib's qim_register, also run by session_project (the durable
-- batch): the seed lost registrations when the low-latency path wrote differently from
-- the durable one.
-- KEYS: 1 the ZSET of first registrations waiting for CQL user_conversation_state (used
--       only when ARGV[1] = "1", the archive tier), then per registration 4 keys: convs
--       ZSET, read HASH, peers HASH, badge dirty HASH (docs/decisions/0129)
-- ARGV: 1 "1" with the archive tier else "0", then per registration 6 args: conversation
--       id hex, created_at_ms, conversation_seq of the user's own message ("0": the user
--       is not the sender), direct peer ("0": unknown), its pending member
--       "<tenant hex>:<user>:<conversation hex>:<peer>" ("" without the archive tier), its
--       badge dirty member "<tenant hex>:<user>:<conversation hex>"
-- Returns the number of registrations whose conversation is new for its user.
--#include session_lib
local pending = nil
if ARGV[1] == '1' then
  pending = KEYS[1]
end
local added, k = 0, 2
for a = 2, #ARGV, 6 do
  added = added + qim_register(KEYS[k], KEYS[k + 1], KEYS[k + 2], pending,
                               ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4],
                               KEYS[k + 3], ARGV[a + 5])
  k = k + 4
end
return added
