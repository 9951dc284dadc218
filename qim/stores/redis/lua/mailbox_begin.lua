-- begin_dispatch. KEYS: 1 DispatchProgress, 2 DP index. ARGV: 1 digest, 2 offset, 3 mailbox_seq (8 B).
-- Returns {status, mailbox_seq}.
--#include mailbox_lib
local status, seq = qim_begin(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3])
return {status, seq}
