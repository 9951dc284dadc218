-- reserve_group_send (DESIGN.md §5.2, §7): reserve_and_record for a group message; the
-- sender must be a current member and the membership_version frozen in the audience
-- must still be the group's (QIM_MEMBERSHIP_CHANGED: the writer re-plans, bounded).
-- KEYS: 1..5 as reserve_and_record, 6 group meta, 7 group members
-- ARGV: 1..7 as reserve_and_record, 8 expected membership_version, 9 sender user id
--#include commit_lib
local existing = qim_existing(KEYS[1], ARGV[1])
if existing then return existing end
qim_group_check(KEYS[6], KEYS[7], ARGV[9], ARGV[8])
local out = qim_record(KEYS, ARGV)
return out
