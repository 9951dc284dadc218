-- NotifyStore.sent for one alert (qim/stores/redis/notify.py): the alert's key says "s"
-- (made) for ARGV[1] ms, whatever claim it held: a replay within that time makes none.
-- A script so that the alerts of one event-loop turn share one pipelined round trip
-- (Scripts coalesce; issue 39: one round trip per alert was left open).
-- KEYS: 1 the alert key. Returns 1.
redis.call('SET', KEYS[1], 's', 'PX', tonumber(ARGV[1]))
return 1
