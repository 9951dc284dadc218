-- Shared functions of the reserving scripts (docs/design.md §5.2). Included by
-- reserve_and_record, reserve_group_send, group_change and state_change; never loaded
-- alone. Errors are raised as {err = "QIM_<REASON> ..."}.
--
-- Every reserving script takes the same leading KEYS and ARGV (k, a below):
-- KEYS 1 commit hash, 2 conversation seq, 3 message record, 4 history zset,
--      5 in-flight zset, 6 unpublished zset (conversation_seq -> commit hash),
--      7 unpublished owners hash (writer token -> count), 8 last message_id of the
--      conversation, 9 commit hash of the previous send (= KEYS 1 when none)
-- ARGV 1 identity digest (36 B), 2 message_id (16 B), 3 created_at_ms, 4 record bytes
--      without conversation_seq, 5 frozen audience (opaque), 6 "1" = split mode (fault
--      injection: stop at RESERVED), 7 writer token, 8 "1" = list every older
--      unpublished commit, 9 "1" = KEYS 9 must exist, 10 how many older unpublished
--      commits to list at most
-- Script-specific KEYS start at 10 and ARGV at 11.
-- Times are Redis's own (qim_now_ms): the in-flight index is judged by CommitRecovery
-- against the same clock, never against the clock of the writer that reserved
-- (docs/decisions/0032).
-- Reply: {status, state, message_id, conversation_seq, created_at_ms, older} where
-- status is FRESH or EXISTING and older = {commit key, seq, ...} of unpublished
-- commits below this one that the caller must publish first (docs/decisions/0017).
--#include clock_lib

local function qim_older(k, a, seqs)
  return redis.call('ZRANGEBYSCORE', k[6], '-inf', '(' .. seqs, 'WITHSCORES', 'LIMIT', 0, tonumber(a[10]))
end

-- Idempotency on (tenant, sender, cmid): an existing commit hash with the same identity
-- digest is returned (with the older unpublished commits when it is still in flight);
-- another digest is CONFLICT. nil when absent.
local function qim_existing(k, a)
  local e = redis.call('HMGET', k[1], 'dg', 'st', 'mid', 'cseq', 'cat')
  if e[1] then
    if e[1] ~= a[1] then
      error({err = 'QIM_CONFLICT client_message_id reused with other content'})
    end
    local older = {}
    if e[2] ~= 'COMMITTED' then older = qim_older(k, a, e[4]) end
    return {'EXISTING', e[2], e[3], e[4], e[5], older}
  end
  return nil
end

local function qim_varint(n)
  local out = {}
  while n >= 128 do
    out[#out + 1] = string.char(n % 128 + 128)
    n = math.floor(n / 128)
  end
  out[#out + 1] = string.char(n)
  return table.concat(out)
end

local function qim_hex(s)
  return (string.gsub(s, '.', function(c) return string.format('%02x', string.byte(c)) end))
end

-- A group actor must be a current member (its last interval is open: ":0" at the end)
-- and the membership version the caller planned with must still be the group's.
-- `check_mute` (sends and edits): the meta's "mute:<actor>" field, "<until_ms>\t<message>"
-- written by `qimctl moderation mute` (docs/decisions/0127), refuses while until_ms is 0
-- (no end) or after Redis's now; the same HGET's instance, no extra round trip.
local function qim_group_check(meta_key, members_key, actor, expected_version, check_mute)
  local m = redis.call('HGET', members_key, actor)
  if not m or not string.find(m, ':0$') then
    error({err = 'QIM_FORBIDDEN not a member of the group'})
  end
  if check_mute then
    local mute = redis.call('HGET', meta_key, 'mute:' .. actor)
    local tab = mute and string.find(mute, '\t', 1, true)
    if tab then
      local until_ms = tonumber(string.sub(mute, 1, tab - 1)) or 0
      if until_ms == 0 or until_ms > tonumber(qim_now_ms()) then
        error({err = 'QIM_MUTED ' .. string.sub(mute, tab + 1)})
      end
    end
  end
  if redis.call('HGET', meta_key, 'ver') ~= expected_version then
    error({err = 'QIM_MEMBERSHIP_CHANGED membership version moved'})
  end
end

-- A send of a revoked token (docs/decisions/0080-revocation-checked-at-commit.md): the
-- cutoffs (unix s) of the sender's device and of the whole user against the token's iat;
-- refused at or before the newer one. iat "0": no token (the admin plane), not checked.
-- In the reserving call itself, so once `qimctl token revoke` wrote the cutoff no send of
-- that token commits, whichever gateway it came through and however late.
local function qim_revocation_check(device_key, user_key, iat)
  if iat == '0' then return end
  local cutoff = math.max(tonumber(redis.call('GET', device_key) or '0') or 0,
    tonumber(redis.call('GET', user_key) or '0') or 0)
  if tonumber(iat) <= cutoff then
    error({err = 'QIM_REVOKED token revoked for this device: sign in again'})
  end
end

-- A send the deployment's send policy refused before (docs/decisions/0099, Amendment):
-- the refusal kept beside the commit keys (policy_refuse.lua) answers a retry of the
-- same (sender, cmid) whatever the policy says now, the stored reason, nothing reserved;
-- another identity digest is CONFLICT, as at the commit. nil when none is kept. Only
-- called when the caller passed the refusal key (a policy is configured).
local function qim_refusal_check(refusal_key, digest)
  local r = redis.call('HMGET', refusal_key, 'dg', 'why')
  if not r[1] then return nil end
  if r[1] ~= digest then
    error({err = 'QIM_CONFLICT client_message_id reused with other content'})
  end
  return {'REFUSED', r[2], '', '0', '0', {}}
end

-- Checks every reservation passes before anything is written (scripts are not rolled
-- back): the previous send of the device holds a commit state, and the message_id
-- (hence created_at) is not below the conversation's last one, so created_at never
-- decreases as conversation_seq grows. The refusal carries the last id (hex): the
-- writer's HLC observes it and issues a new id (HLC receive rule).
local function qim_reserve_checks(k, a)
  if a[9] == '1' and redis.call('EXISTS', k[9]) == 0 then
    error({err = 'QIM_PREVIOUS_PENDING previous send not yet sequenced'})
  end
  local last = redis.call('GET', k[8])
  if last and #last == 16 then
    for i = 1, 16 do
      local x, y = string.byte(a[2], i), string.byte(last, i)
      if x ~= y then
        if x < y then error({err = 'QIM_CLOCK_BEHIND ' .. qim_hex(last)}) end
        break
      end
    end
  end
end

-- INCR conversation_seq, store the canonical record (field 4 = seq appended: protobuf
-- keeps the last value), the history index and the commit hash; register in-flight and
-- unpublished (removed by mark_committed). split = "1" (fault injection) stops at
-- RESERVED with the record in the commit hash.
local function qim_record(k, a)
  local now = qim_now_ms()
  local seq = redis.call('INCR', k[2])
  local record = a[4] .. string.char(0x20) .. qim_varint(seq)
  local seqs = string.format('%d', seq)
  local state = 'RECORDED'
  redis.call('HSET', k[1], 'dg', a[1], 'mid', a[2], 'cseq', seqs, 'cat', a[3], 'aud', a[5], 'upd', now,
    'own', a[7])
  if a[6] == '1' then
    state = 'RESERVED'
    redis.call('HSET', k[1], 'st', state, 'rec', record)
  else
    redis.call('SET', k[3], record)
    redis.call('ZADD', k[4], seq, a[2])
    redis.call('HSET', k[1], 'st', state)
  end
  redis.call('ZADD', k[5], now, k[1])
  redis.call('SET', k[8], a[2])
  redis.call('ZADD', k[6], seq, k[1])
  redis.call('HINCRBY', k[7], a[7], 1)
  local older = {}
  -- fast path: only this writer has unpublished commits here, and it tracks its own
  if a[8] == '1' or redis.call('HLEN', k[7]) > 1 then older = qim_older(k, a, seqs) end
  return {'FRESH', state, a[2], seqs, a[3], older}, seq
end
