-- reserve_and_record (docs/design.md §5.2): idempotency on (tenant, sender, cmid), then
-- INCR conversation_seq, freeze the audience and store the canonical MessageRecord and
-- the history index, all in one atomic call. Validation happened before this call, so
-- bad input never consumes a sequence number.
-- KEYS 1..9 and ARGV 1..10: see commit_lib.lua; KEYS 10, 11 the revocation cutoffs of the
-- sender's device and user, ARGV 11 the token's iat (docs/decisions/0080); KEYS 12, only
-- when a send policy is configured, the send's kept-refusal hash (docs/decisions/0099).
-- Returns {status, state, message_id, conversation_seq, created_at_ms, older}; status
-- REFUSED (state = the kept reason) when KEYS 12 holds a refusal of this send.
-- Errors: QIM_CONFLICT (digest differs), QIM_REVOKED, QIM_PREVIOUS_PENDING, QIM_CLOCK_BEHIND <hex id>.
--#include commit_lib
local existing = qim_existing(KEYS, ARGV)
if existing then return existing end
if KEYS[12] then
  local refused = qim_refusal_check(KEYS[12], ARGV[1])
  if refused then return refused end
end
qim_revocation_check(KEYS[10], KEYS[11], ARGV[11])
qim_reserve_checks(KEYS, ARGV)
local out = qim_record(KEYS, ARGV)
return out
