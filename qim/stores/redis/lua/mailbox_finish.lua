-- finish_dispatch. KEYS: 1 DispatchProgress, 2 shard watermark.
-- ARGV: 1 expected blob ("" = none yet), 2 new blob, 3 shard_epoch. Returns 1.
--#include mailbox_lib
qim_finish(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
return 1
