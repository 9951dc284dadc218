"""SessionEpochStore on Redis (qim/stores/presence.py): one counter per device (INCR),
never expiring (an epoch must never go back). Keys in keys.py; with several instances
a device's counter is on its user's instance (decision 0096)."""

from __future__ import annotations

from qim.stores.redis.keys import session_epoch_key
from qim.stores.redis.scripts import boundary
from qim.stores.redis.topology import as_topology

SCRIPTS = ("session_epoch_next",)


class RedisSessionEpochs:
    """SessionEpochStore over a RedisTopology (the user's instance), or one redis-py client."""

    def __init__(self, client) -> None:
        self._t = t = as_topology(client)
        self._single, self._redis = t.single, t.home

    async def next_epoch(self, tenant: int, user: int, device: int) -> int:
        """SessionEpochStore.next_epoch: one INCR on the user's instance
        (lua/session_epoch_next.lua): the logins of one event-loop turn share one
        pipelined round trip per instance (issue 41: a login's Redis calls were a tenth
        of its gateway CPU). StoreUnavailable when Redis cannot be reached."""
        client = self._redis if self._single else self._t.user(tenant, user)
        scripts = self._t.scripts(client, SCRIPTS, coalesce=True)
        with boundary("session epoch"):
            return int(await scripts.call("session_epoch_next", [session_epoch_key(tenant, user, device)], []))
