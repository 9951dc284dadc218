-- One reaction added or removed, atomically (ReactionStore.change; docs/decisions/0121).
-- KEYS[1] counts HASH emoji -> count, KEYS[2] reactors SET "<user>:<emoji>".
-- ARGV: user, emoji, "add" | "remove", max distinct emoji.
-- Returns {changed (0/1), full (0/1), summary flat as reaction_lib}. A repeat changes
-- nothing (idempotent per (user, message, emoji)); an add of an emoji the message does
-- not have yet when it already has max distinct ones is refused as full. A change bumps
-- the summary's version (VERSION_FIELD, reaction_lib) in this same atomic call, so the
-- versions of one message's changes are strictly increasing in the order they ran and
-- a reader keeps the summary with the highest (decision 0121, amended: versions). The
-- version stays when the last reaction goes: a later summary must never restart at 1.
--#include reaction_lib
local counts_key, reactors_key = KEYS[1], KEYS[2]
local user, emoji, op, max_distinct = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local member = user .. ':' .. emoji
local changed, full = 0, 0
if op == 'add' then
  if redis.call('SISMEMBER', reactors_key, member) == 0 then
    local distinct = redis.call('HLEN', counts_key) - redis.call('HEXISTS', counts_key, VERSION_FIELD)
    if redis.call('HEXISTS', counts_key, emoji) == 0 and distinct >= max_distinct then
      full = 1
    else
      redis.call('SADD', reactors_key, member)
      redis.call('HINCRBY', counts_key, emoji, 1)
      changed = 1
    end
  end
elseif redis.call('SREM', reactors_key, member) == 1 then
  if redis.call('HINCRBY', counts_key, emoji, -1) <= 0 then
    redis.call('HDEL', counts_key, emoji)
  end
  changed = 1
end
if changed == 1 then
  redis.call('HINCRBY', counts_key, VERSION_FIELD, 1)
end
return {changed, full, qim_reaction_summary(counts_key, reactors_key, user)}
