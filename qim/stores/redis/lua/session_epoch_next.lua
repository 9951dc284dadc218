-- SessionEpochStore.next_epoch (qim/stores/redis/presence.py): the device's next
-- session_epoch, one INCR that never expires (an epoch must never go back). A script so
-- that the logins of one event-loop turn share one pipelined round trip over the lean
-- connection (Scripts coalesce; issue 41, logins per second).
-- KEYS: 1 the device's epoch counter. Returns the new epoch.
return redis.call('INCR', KEYS[1])
