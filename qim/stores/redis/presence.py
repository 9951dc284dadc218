"""SessionEpochStore on Redis (qim/stores/presence.py): one counter per device (INCR),
never expiring (an epoch must never go back). Keys in keys.py."""

from __future__ import annotations

from qim.stores.redis.keys import session_epoch_key
from qim.stores.redis.scripts import boundary
from qim.stores.redis.topology import as_topology


class RedisSessionEpochs:
    """SessionEpochStore over one Redis client."""

    def __init__(self, client) -> None:
        self._t = as_topology(client)
        self._redis = client = self._t.home

    async def next_epoch(self, tenant: int, user: int, device: int) -> int:
        """SessionEpochStore.next_epoch: one INCR."""
        with boundary("session epoch"):
            return int(await self._redis.incr(session_epoch_key(tenant, user, device)))
