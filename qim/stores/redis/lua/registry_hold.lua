-- The operator's hold of shard leases while `qimctl redis move-shard` copies a
-- MailboxShard (docs/decisions/0104). KEYS: shard HASHes (one per kind). ARGV: 1 "hold"
-- or "free", 2 the move's token, 3 ttl ms.
-- hold: a shard nobody holds (or whose lease ended) is granted to node "qimctl-move"
-- under the token with owner_epoch + 1 (the fence that keeps every earlier owner out);
-- one already held under the token is renewed (a re-run with the same token). Returns
-- one owner_epoch per key, 0 where another owner still holds it.
-- free: every key held under the token is expired (owner cleared, epoch kept: the next
-- owner's grant raises it). Returns how many were freed.
--#include registry_lib
local now = qim_now()
local out, n = {}, 0
for i = 1, #KEYS do
  local s = redis.call('HMGET', KEYS[i], 'node', 'inc', 'epoch', 'exp')
  local epoch = tonumber(s[3] or '0')
  local mine = s[1] == 'qimctl-move' and s[2] == ARGV[2]
  if ARGV[1] == 'free' then
    if mine then
      redis.call('HSET', KEYS[i], 'node', '', 'inc', '', 'exp', 0)
      n = n + 1
    end
  else
    out[i] = 0
    if mine or (not s[1]) or s[1] == '' or tonumber(s[4] or '0') <= now then
      if not mine then
        epoch = epoch + 1
        redis.call('HSET', KEYS[i], 'epoch', epoch, 'since', now)
      end
      redis.call('HSET', KEYS[i], 'node', 'qimctl-move', 'inc', ARGV[2], 'exp', now + tonumber(ARGV[3]))
      out[i] = epoch
    end
  end
end
if ARGV[1] == 'free' then
  return n
end
return out
