-- finish_dispatch. KEYS: 1 DispatchProgress, 2 shard watermark.
-- ARGV: 1 expected blob ("" = none yet), 2 new blob, 3 shard_epoch, 4 writer ("" = none),
-- 5 owner_epoch fence.
-- Returns 1 (W written now) or 0 (this writer's own earlier finish of the same W).
--#include mailbox_lib
qim_fenced(KEYS[2], ARGV[5])
return qim_finish(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
