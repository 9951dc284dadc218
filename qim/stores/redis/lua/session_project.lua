-- session_project (docs/perf-profile.md, per-message costs): one durable projection batch in ONE round trip: the
-- registrations of a batch of dispatch records, then the compare-and-set advance of the
-- checkpoint of every session shard the batch covers (session_checkpoint.lua's
-- "advance", same errors; each checkpoint fenced by its owner_epoch:
-- docs/decisions/0040-scale-leases-and-fencing.md). Every checkpoint is checked before
-- anything is written and moved only after every registration ran: a script error (a
-- stale fence, a corrupt key) leaves them where they were.
-- KEYS: 1 first-registration ZSET (used only when ARGV[3] = "1"), then n checkpoint
--       HASHes, then per registration 4 keys: convs ZSET, read HASH, peers HASH, badge dirty HASH
--       (docs/decisions/0129)
-- ARGV: 1 binding, 2 number n of checkpoints, 3 "1" with the archive tier else "0",
--       then n quintuples (shard, owner_epoch, tenure token ("" not checked),
--       expected next offset, new next offset; the tenure: session_checkpoint.lua),
--       then per registration 6 args: conversation hex, created_at_ms, own seq, peer,
--       pending member, badge dirty member
-- Returns the number of conversations new for their user, or -1 when every checkpoint
-- already holds its new offset (a retry after a lost reply: the registrations ran).
--#include session_lib
local n = tonumber(ARGV[2])
local pending = nil
if ARGV[3] == '1' then
  pending = KEYS[1]
end
local expected_ok, already, moved = true, true, nil
for i = 1, n do
  local key, a = KEYS[1 + i], 4 + (i - 1) * 5
  local cur = redis.call('HMGET', key, 'oe', 'bind', 'p', 'tn')
  if (cur[1] or '0') ~= ARGV[a + 1] then
    error({err = 'QIM_NOT_OWNER shard=' .. ARGV[a] .. ' owner_epoch ' .. ARGV[a + 1] .. ' is stale: fenced at '
      .. (cur[1] or '0')})
  end
  if ARGV[a + 2] ~= '' and cur[4] ~= ARGV[a + 2] then
    -- a write of an earlier acquisition by the same owner, landing after it took the shard again
    error({err = 'QIM_NOT_OWNER shard=' .. ARGV[a] .. ' tenure is stale: the shard was acquired again'})
  end
  if cur[2] ~= ARGV[1] then
    error({err = 'QIM_CKPT_BINDING shard=' .. ARGV[a] .. ' checkpoint rebound under us'})
  end
  if (cur[3] or '') ~= ARGV[a + 3] then
    expected_ok = false
    moved = moved or ARGV[a]
  end
  if (cur[3] or '') ~= ARGV[a + 4] then already = false end
end
if not expected_ok then
  if already then
    return -1
  end
  error({err = 'QIM_CKPT_CONFLICT shard=' .. moved .. ' checkpoint moved under us'})
end
local added = 0
local k = 2 + n
for a = 4 + 5 * n, #ARGV, 6 do
  added = added + qim_register(KEYS[k], KEYS[k + 1], KEYS[k + 2], pending,
                               ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4],
                               KEYS[k + 3], ARGV[a + 5])
  k = k + 4
end
for i = 1, n do
  redis.call('HSET', KEYS[1 + i], 'p', ARGV[4 + (i - 1) * 5 + 4])
end
return added
