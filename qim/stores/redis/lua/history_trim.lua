-- history_trim (seed 000 ADR-0018, seed 004 §3): raise a conversation's hot floor over the
-- longest prefix of the given messages that is still stored exactly as the trimmer checked
-- it against the archive, and delete that prefix from Redis, in one atomic step: a reader
-- that reads the floor with the history index (MULTI) never sees a gap.
-- KEYS: 1 history zset, 2 floor STRING, 3 archived-states zset, 4 trim queue zset (absent
--       when the queue is on another instance than the bucket: the caller moves it,
--       docs/decisions/0101)
-- ARGV: 1 trim queue member, 2 record key prefix, 3 state key prefix, then per message
--       (message_id, conversation_seq, state name or "" for NORMAL), ascending seq
-- A message is trimmed only when it is the next history entry above the floor, at that
-- seq, with that state. Returns {floor, trimmed, created_at ms of the next hot message
-- or -1 when none is left}.
local function hex(s)
  return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end))
end
local function created_at(mid)
  local v = 0
  for i = 1, 6 do v = v * 256 + string.byte(mid, i) end
  return v
end
local floor = tonumber(redis.call('GET', KEYS[2]) or '0')
local upto = floor
local done = {}
for i = 4, #ARGV, 3 do
  local mid, seq, st = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  local score = redis.call('ZSCORE', KEYS[1], mid)
  if not score or tonumber(score) ~= seq or seq <= upto then break end
  if redis.call('ZCOUNT', KEYS[1], '(' .. upto, '(' .. seq) ~= 0 then break end
  local h = hex(mid)
  if (redis.call('GET', ARGV[3] .. h) or '') ~= st then break end
  upto = seq
  done[#done + 1] = {mid, h}
end
if #done > 0 then
  redis.call('SET', KEYS[2], string.format('%d', upto))
  for _, d in ipairs(done) do
    redis.call('ZREM', KEYS[1], d[1])
    redis.call('DEL', ARGV[2] .. d[2], ARGV[3] .. d[2])
  end
  -- recalls/deletes of messages trimmed earlier: their CONTROL message is at or below
  -- the floor now, so the archive holds their state
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', upto)) do
    redis.call('DEL', ARGV[3] .. string.sub(m, 1, 32))  -- member: "<message_id hex>:<STATE>"
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', upto)
end
local nxt = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. upto, '+inf', 'LIMIT', 0, 1)
local at = -1
if #nxt > 0 then at = created_at(nxt[1]) end
if KEYS[4] then
  if at < 0 then
    redis.call('ZREM', KEYS[4], ARGV[1])
  else
    redis.call('ZADD', KEYS[4], at, ARGV[1])
  end
end
return {string.format('%d', upto), #done, string.format('%d', at)}
