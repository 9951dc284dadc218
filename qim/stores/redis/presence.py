"""SessionEpochStore on Redis (qim/stores/presence.py): one counter per device (INCR),
never expiring (an epoch must never go back). Keys in keys.py; with several instances
a device's counter is on its user's instance (decision 0096)."""

from __future__ import annotations

from qim.stores.redis.keys import session_epoch_key
from qim.stores.redis.scripts import boundary
from qim.stores.redis.topology import as_topology


class RedisSessionEpochs:
    """SessionEpochStore over a RedisTopology (the user's instance), or one redis-py client."""

    def __init__(self, client) -> None:
        self._t = t = as_topology(client)
        self._single, self._redis = t.single, t.home

    async def next_epoch(self, tenant: int, user: int, device: int) -> int:
        """SessionEpochStore.next_epoch: one INCR on the user's instance."""
        client = self._redis if self._single else self._t.user(tenant, user)
        with boundary("session epoch"):
            return int(await client.incr(session_epoch_key(tenant, user, device)))
