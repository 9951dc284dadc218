-- session_project (docs/perf-profile.md, per-message costs): one durable projection batch in ONE round trip: the
-- registrations of a batch of dispatch records, then the compare-and-set advance of the
-- node's checkpoint (session_checkpoint.lua's "advance", same errors). The checkpoint is
-- checked before anything is written and moved only after every registration ran: a
-- script error (a corrupt key) leaves it where it was, so the batch is replayed.
-- KEYS: 1 checkpoint HASH, 2 first-registration ZSET (used only when ARGV[3] = "1"),
--       then per registration 3 keys: convs ZSET, read HASH, peers HASH
-- ARGV: 1 binding, 2 number n of checkpoint triples, 3 "1" with the archive tier else
--       "0", then n triples (field, expected next offset, new next offset), then per
--       registration 5 args: conversation hex, created_at_ms, own seq, peer, pending member
-- Returns the number of conversations new for their user, or -1 when every field already
-- holds its new offset (a retry after a lost reply: the registrations ran with it).
--#include session_lib
if redis.call('HGET', KEYS[1], 'bind') ~= ARGV[1] then
  error({err = 'QIM_CKPT_BINDING checkpoint rebound under us'})
end
local n = tonumber(ARGV[2])
local pending = nil
if ARGV[3] == '1' then
  pending = KEYS[2]
end
local first_reg = 4 + 3 * n
local expected_ok, already = true, true
for i = 4, first_reg - 1, 3 do
  local cur = redis.call('HGET', KEYS[1], ARGV[i]) or ''
  if cur ~= ARGV[i + 1] then expected_ok = false end
  if cur ~= ARGV[i + 2] then already = false end
end
if not expected_ok then
  if already then
    return -1
  end
  error({err = 'QIM_CKPT_CONFLICT checkpoint moved under us'})
end
local added = 0
local k = 3
for a = first_reg, #ARGV, 5 do
  added = added + qim_register(KEYS[k], KEYS[k + 1], KEYS[k + 2], pending,
                               ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4])
  k = k + 3
end
for i = 4, first_reg - 1, 3 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
end
return added
