-- convstate_change (docs/decisions/0122, 0157): one SET_CONVERSATION_STATE, atomic with
-- the conversation set score a hide records and with the state's version.
-- KEYS: 1 state HASH, 2 conversation set ZSET
-- ARGV: 1 conversation_id hex, 2 pinned ("" keep | 0 | 1), 3 muted_until ("" keep | ms),
--       4 hide ("" keep | 0 show | 1 hide)
-- Returns the stored value "<pinned>:<muted_until>:<hidden_at>:<version>".
-- The version grows by one at every change, and the field is kept even when every
-- choice is back to its default: a device orders the states it is told by it (0157), so
-- a version must never start again from 0. A value of the older shape (no version) reads
-- as version 0.
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local p, m, h, v = '0', '0', '0', '0'
if cur then
  p, m, h, v = string.match(cur, '^(%d+):(%d+):(%d+):(%d+)$')
  if not p then
    p, m, h = string.match(cur, '^(%d+):(%d+):(%d+)$')
    v = '0'
  end
  if not p then
    return redis.error_reply('QIM_CORRUPT conversation state')
  end
end
if ARGV[2] ~= '' then p = ARGV[2] end
if ARGV[3] ~= '' then m = ARGV[3] end
if ARGV[4] == '1' then
  local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
  h = score and string.format('%d', tonumber(score)) or '0'
elseif ARGV[4] == '0' then
  h = '0'
end
local value = p .. ':' .. m .. ':' .. h .. ':' .. string.format('%d', tonumber(v) + 1)
redis.call('HSET', KEYS[1], ARGV[1], value)
return value
