-- The fence a MailboxShard move writes on the shard's source instance before it copies
-- (docs/decisions/0104): the owner_epochs the move's hold was granted, so every write of
-- an earlier owner (mailbox_lib qim_fenced, session_checkpoint) is refused from here on.
-- KEYS: 1 the shard's watermark HASH, 2 its session checkpoint HASH. ARGV: 1 the mailbox
-- kind's owner_epoch, 2 the session kind's. A fence above either means a newer owner
-- exists (a move that lost its hold): refused (QIM_NOT_OWNER), nothing written.
for i = 1, 2 do
  local oe = tonumber(redis.call('HGET', KEYS[i], 'oe') or '0')
  if oe > tonumber(ARGV[i]) then
    error({err = 'QIM_NOT_OWNER owner_epoch ' .. ARGV[i] .. ' is stale: ' .. KEYS[i] .. ' is fenced at ' .. oe})
  end
end
redis.call('HSET', KEYS[1], 'oe', ARGV[1])
redis.call('HSET', KEYS[2], 'oe', ARGV[2])
return 1
