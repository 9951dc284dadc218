-- begin_dispatch. KEYS: 1 DispatchProgress, 2 DP index, 3 shard watermark (the fence).
-- ARGV: 1 digest, 2 offset, 3 mailbox_seq (8 B), 4 owner_epoch fence. Returns {status, mailbox_seq}.
--#include mailbox_lib
qim_fenced(KEYS[3], ARGV[4])
local status, seq = qim_begin(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
return {status, seq}
