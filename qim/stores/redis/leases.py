"""ClockLeaseStore on Redis (qim/stores/leases.py): writer_id leases are STRINGs with a
TTL (SET NX), windows and the cluster high-water STRINGs moved by hlc_lease.lua and
lease_renew.lua. Keys in keys.py."""

from __future__ import annotations

from qim.stores.leases import Window
from qim.stores.redis.keys import hlc_cluster_key, hlc_key, writer_lease_key
from qim.stores.redis.scripts import boundary
from qim.stores.redis.topology import as_topology

SCRIPTS = ("hlc_lease", "lease_renew")
WRITER_ID_MAX = 65535


class RedisClockLeases:
    """ClockLeaseStore over a RedisTopology or one redis-py client. Every key is of no
    commit bucket, so all of them are on the home instance (decision 0096): the window
    and the cluster high-water stay in one atomic call."""

    def __init__(self, client) -> None:
        self._t = as_topology(client)
        self._redis = client = self._t.home
        self._scripts = self._t.scripts(client, SCRIPTS)

    async def take_writer_id(self, region_id: int, token: str, ttl_ms: int, writer_id: int = 0) -> int:
        """ClockLeaseStore.take_writer_id: SET NX PX per candidate id (SET PX for a fixed one)."""
        with boundary("writer_id lease"):
            if writer_id:
                await self._redis.set(writer_lease_key(region_id, writer_id), token, px=ttl_ms)
                return writer_id
            for candidate in range(1, WRITER_ID_MAX + 1):
                if await self._redis.set(writer_lease_key(region_id, candidate), token, nx=True, px=ttl_ms):
                    return candidate
        return 0

    async def lease_window(self, region_id: int, writer_id: int, now_ms: int, window_ms: int,
                           expected_end: int, slack_ms: int) -> Window:
        """ClockLeaseStore.lease_window: hlc_lease.lua."""
        start, end, ceiling = await self._scripts.call(
            "hlc_lease", [hlc_key(region_id, writer_id), hlc_cluster_key()],
            [now_ms, window_ms, str(expected_end) if expected_end else "", slack_ms])
        return Window(int(start) if start else None, int(end), int(ceiling) if ceiling else None)

    async def renew(self, region_id: int, writer_id: int, token: str, ttl_ms: int, ceiling_ms: int) -> bool:
        """ClockLeaseStore.renew: lease_renew.lua (lease and cluster high-water in one call)."""
        renewed = await self._scripts.call("lease_renew", [writer_lease_key(region_id, writer_id), hlc_cluster_key()],
                                           [token, ttl_ms, ceiling_ms])
        return bool(int(renewed))
