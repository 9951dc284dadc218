-- Read one user's day index (docs/design.md §5.5): Redis's clock and the index, moved
-- first when it is still of the layout before docs/decisions/0064 (a HASH).
-- KEYS: 1 day index. Returns {seconds, microseconds, {member, score, ...}}.
--#include mailbox_lib
qim_index_migrate(KEYS[1])
local now = redis.call('TIME')
return {now[1], now[2], redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')}
