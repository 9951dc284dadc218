-- reserve_group_send (docs/design.md §5.2, §7): reserve_and_record for a group message; the
-- sender must be a current member and the membership_version frozen in the audience
-- must still be the group's (QIM_MEMBERSHIP_CHANGED: the writer re-plans, bounded).
-- KEYS: 1..9 as reserve_and_record, 10 group meta, 11 group members, 12, 13 the revocation
--       cutoffs of the sender's device and user, 14 (only with a send policy) the
--       send's kept-refusal hash (status REFUSED, as reserve_and_record)
-- ARGV: 1..10 as reserve_and_record, 11 expected membership_version, 12 sender user id,
--       13 the token's iat (docs/decisions/0080)
--#include commit_lib
local existing = qim_existing(KEYS, ARGV)
if existing then return existing end
if KEYS[14] then
  local refused = qim_refusal_check(KEYS[14], ARGV[1])
  if refused then return refused end
end
qim_revocation_check(KEYS[12], KEYS[13], ARGV[13])
qim_group_check(KEYS[10], KEYS[11], ARGV[12], ARGV[11], true)
qim_reserve_checks(KEYS, ARGV)
local out = qim_record(KEYS, ARGV)
return out
