-- reserve_and_record (DESIGN.md §5.2): idempotency on (tenant, sender, cmid), then
-- INCR conversation_seq, freeze the audience and store the canonical MessageRecord and
-- the history index, all in one atomic call. Validation happened before this call, so
-- bad input never consumes a sequence number.
-- KEYS: 1 commit hash, 2 conversation seq, 3 message record, 4 history zset, 5 in-flight zset
-- ARGV: 1 identity digest (36 B), 2 message_id (16 B), 3 created_at_ms, 4 record bytes
--       without conversation_seq, 5 frozen audience (opaque), 6 now_ms, 7 "1" = split
--       mode (fault injection): stop at RESERVED with the record kept in the commit
--       hash; record.lua performs the RECORDED step as a second call.
-- Returns {status, state, message_id, conversation_seq, created_at_ms}; status is
-- FRESH or EXISTING. Error reply "QIM_CONFLICT" when the digest differs.
local existing = redis.call('HMGET', KEYS[1], 'dg', 'st', 'mid', 'cseq', 'cat')
if existing[1] then
  if existing[1] ~= ARGV[1] then
    return redis.error_reply('QIM_CONFLICT client_message_id reused with other content')
  end
  return {'EXISTING', existing[2], existing[3], existing[4], existing[5]}
end
local seq = redis.call('INCR', KEYS[2])
-- Append protobuf field 4 (conversation_seq, varint) to the record: a later field
-- value wins, so the stored bytes parse as the full record.
local function varint(n)
  local out = {}
  while n >= 128 do
    out[#out + 1] = string.char(n % 128 + 128)
    n = math.floor(n / 128)
  end
  out[#out + 1] = string.char(n)
  return table.concat(out)
end
local record = ARGV[4] .. string.char(0x20) .. varint(seq)
local state = 'RECORDED'
redis.call('HSET', KEYS[1], 'dg', ARGV[1], 'mid', ARGV[2], 'cseq', string.format('%d', seq),
           'cat', ARGV[3], 'aud', ARGV[5], 'upd', ARGV[6])
if ARGV[7] == '1' then
  state = 'RESERVED'
  redis.call('HSET', KEYS[1], 'st', state, 'rec', record)
else
  redis.call('SET', KEYS[3], record)
  redis.call('ZADD', KEYS[4], seq, ARGV[2])
  redis.call('HSET', KEYS[1], 'st', state)
end
redis.call('ZADD', KEYS[5], ARGV[6], KEYS[1])
return {'FRESH', state, ARGV[2], string.format('%d', seq), ARGV[3]}
