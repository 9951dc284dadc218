-- SessionStore.mark_checked: mark a user's conversation set as checked against CQL
-- user_conversation_state (docs/decisions/0065), only while the set still holds at least
-- ARGV[1] members: a set Redis lost between the check and this call (a restart, a
-- failover) is not marked, so the next cold read checks it again.
-- KEYS: 1 the conversation set ZSET, 2 the mark STRING. Returns 1 when marked, else 0.
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  return 0
end
redis.call('SET', KEYS[2], '1')
return 1
