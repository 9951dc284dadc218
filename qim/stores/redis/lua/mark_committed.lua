-- mark_committed (docs/design.md §5.2): the Outbox record is durable (its offset is the
-- OUTBOXED evidence), so the commit hash shrinks to the ACK coordinates and expires
-- at committed_at + ttl (2 h for sends, 24 h for group changes and recall/delete, whose
-- retries must replay the original reply). The commit leaves the conversation's
-- unpublished set (and its writer's count there) exactly once. Idempotent: a second call
-- on COMMITTED changes nothing.
-- KEYS: 1 commit hash, 2 in-flight zset, 3 unpublished zset, 4 unpublished owners hash
-- ARGV: 1 outbox offset, 2 committed_at_ms, 3 helper ttl ms
-- Returns {state, message_id, conversation_seq, created_at_ms}
local st = redis.call('HGET', KEYS[1], 'st')
if not st then
  return redis.error_reply('QIM_NOT_FOUND commit state vanished')
end
if st == 'RESERVED' then
  return redis.error_reply('QIM_NOT_RECORDED commit is still RESERVED')
end
if st ~= 'COMMITTED' then
  local own = redis.call('HGET', KEYS[1], 'own')
  if redis.call('ZREM', KEYS[3], KEYS[1]) == 1 and own then
    if redis.call('HINCRBY', KEYS[4], own, -1) <= 0 then
      redis.call('HDEL', KEYS[4], own)
    end
  end
  redis.call('HSET', KEYS[1], 'st', 'COMMITTED', 'obo', ARGV[1], 'upd', ARGV[2])
  redis.call('HDEL', KEYS[1], 'aud', 'rec', 'own')
  redis.call('PEXPIREAT', KEYS[1], tonumber(ARGV[2]) + tonumber(ARGV[3]))
  redis.call('ZREM', KEYS[2], KEYS[1])
end
local r = redis.call('HMGET', KEYS[1], 'st', 'mid', 'cseq', 'cat')
return r
