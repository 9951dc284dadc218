-- record (fault-injection mode only, docs/design.md §5.2): RESERVED → RECORDED as a second
-- call, so a crash between reserve and record can be tested. Idempotent.
-- KEYS: 1 commit hash, 2 message record, 3 history zset
-- ARGV: none (the update time is Redis's clock).
-- Returns the state after the call.
--#include clock_lib
local h = redis.call('HMGET', KEYS[1], 'st', 'rec', 'mid', 'cseq')
if not h[1] then
  return redis.error_reply('QIM_NOT_FOUND commit state vanished')
end
if h[1] ~= 'RESERVED' then
  return h[1]
end
redis.call('SET', KEYS[2], h[2])
redis.call('ZADD', KEYS[3], tonumber(h[4]), h[3])
redis.call('HSET', KEYS[1], 'st', 'RECORDED', 'upd', qim_now_ms())
redis.call('HDEL', KEYS[1], 'rec')
return 'RECORDED'
