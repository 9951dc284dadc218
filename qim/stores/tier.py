"""The archive tier's stores of a process (docs/decisions/0023-archive-tier.md): the
CQL archive and conversation state, and the Redis stores of the archive tier (position,
watermark, retention classes, hot floors). The drivers are imported only when a tier is
built, so importing this module needs neither."""

from __future__ import annotations

from typing import Any

from qim.config.tier import ScyllaConfig
from qim.stores.archive import ArchiveStateStore, ArchiveStore, ConversationStateStore
from qim.stores.messages import MessageStore


class ArchiveTier:
    """The archive tier's stores: `state` (ArchiveStateStore, Redis), `archive`
    (ArchiveStore, CQL), `conversations` (ConversationStateStore, CQL), `cold` (the
    MessageStore over the archive alone), `hot` (HotHistory, Redis)."""

    def __init__(self, redis: Any, scylla: ScyllaConfig, owns_redis: bool = False) -> None:
        """`redis`: a RedisTopology (qim/stores/redis/topology.py) or one redis-py client."""
        from qim.stores.cql.backend import CqlBackend  # the drivers are imported only here
        from qim.stores.redis.archive import RedisArchiveState
        from qim.stores.redis.hot import RedisHotHistory
        from qim.stores.redis.topology import as_topology

        self._topology = as_topology(redis)
        self._owns_redis = owns_redis
        self.cql = CqlBackend(scylla)
        # each routes a conversation's keys to its commit bucket's instance (decision 0096)
        self.state: ArchiveStateStore = RedisArchiveState(self._topology)
        self.hot = RedisHotHistory(self._topology)
        self.archive: ArchiveStore = self.cql.archive
        self.conversations: ConversationStateStore = self.cql.conversations
        self.cold: MessageStore = self.cql.messages

    async def check(self) -> None:
        """The CQL schema check (EngineError naming `qimctl schema apply` or the variable)."""
        await self.cql.check()

    async def apply_schema(self) -> list[int]:
        """qimctl schema apply: migration versions applied now."""
        return await self.cql.apply_schema()

    async def ping(self) -> None:
        """Return when CQL answers; StoreUnavailable otherwise."""
        await self.cql.ping()

    async def close(self) -> None:
        """Close the CQL session (and the Redis client when this tier opened it)."""
        await self.cql.close()
        if self._owns_redis:
            await self._topology.aclose()
