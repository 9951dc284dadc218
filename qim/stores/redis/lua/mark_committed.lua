-- mark_committed (docs/design.md §5.2): the Outbox record is durable (its offset is the
-- OUTBOXED evidence), so the commit hash shrinks to the ACK coordinates and expires
-- ttl after now (2 h for sends, 24 h for group changes and recall/delete, whose retries
-- must replay the original reply). The expiry is relative (PEXPIRE): an absolute time
-- from the writer's clock is judged by Redis's, and a writer 2 h behind had the hash
-- expire at once and answered a committed send with an error (docs/decisions/0032).
-- The commit leaves the conversation's unpublished set (and its writer's count there)
-- exactly once. Idempotent: a second call on COMMITTED changes nothing.
-- KEYS: 1 commit hash, 2 in-flight zset, 3 unpublished zset, 4 unpublished owners hash
-- ARGV: 1 outbox offset, 2 helper ttl ms
-- Returns {state, message_id, conversation_seq, created_at_ms}
--#include clock_lib
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
  redis.call('HSET', KEYS[1], 'st', 'COMMITTED', 'obo', ARGV[1], 'upd', qim_now_ms())
  redis.call('HDEL', KEYS[1], 'aud', 'rec', 'own')
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
  redis.call('ZREM', KEYS[2], KEYS[1])
end
local r = redis.call('HMGET', KEYS[1], 'st', 'mid', 'cseq', 'cat')
return r
