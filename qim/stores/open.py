"""Building the stores of a process (issue 11; issue 14 for the archive tier): the one
place a service's wiring gets its storage from, so no service module names a driver or
a backend.

    stores = open_stores(config.common.redis_addr, mailbox_retention_ms=..., tier=config.common.tier)
    await stores.check(commit_facts=True, allow_unsafe_dev=...)   # at start
    stores.messages / commits / leases / groups / mailboxes / sessions / reads / epochs
    stores.archive_tier   # None without QIM_SCYLLA_ADDRS, else an ArchiveTier

Backends (QIM_MESSAGE_STORE_BACKEND, qim/config_tier.py): "redis" (every store in Redis;
the default without QIM_SCYLLA_ADDRS) and "tiered" (the default with it: MessageStore is
the TieredMessageStore, Redis above each conversation's hot floor and CQL below it).
`open_archive_tier` gives the HistoryArchiver and qimctl the archive tier alone.
"""

from __future__ import annotations

import logging
from typing import Any, Optional, Protocol

from qim.config_tier import ScyllaConfig, TierConfig
from qim.consts import MAILBOX_RETENTION_MS_DEFAULT
from qim.stores.archive import ArchiveStateStore, ArchiveStore, ConversationStateStore
from qim.stores.commits import CommitStore
from qim.stores.errors import StoreUnavailable
from qim.stores.groups import GroupStore
from qim.stores.leases import ClockLeaseStore
from qim.stores.mailboxes import MailboxStore
from qim.stores.messages import MessageStore
from qim.stores.presence import SessionEpochStore
from qim.stores.reads import ReadPositionStore
from qim.stores.registry import ShardRegistry
from qim.stores.sessions import SessionStore

logger = logging.getLogger(__name__)


class Stores(Protocol):
    """Every store of one backend, and the backend's own checks."""

    name: str
    messages: MessageStore
    commits: CommitStore
    leases: ClockLeaseStore
    groups: GroupStore
    mailboxes: MailboxStore
    sessions: SessionStore
    reads: ReadPositionStore
    epochs: SessionEpochStore
    archive_tier: Optional["ArchiveTier"]

    async def check(self, commit_facts: bool, allow_unsafe_dev: bool) -> None:
        """Refuse an unsafe deployment at start (EngineError naming every problem;
        `commit_facts`: the instance holds commit state, so stricter persistence)."""
        ...

    async def ping(self) -> None:
        """Return when the backend answers; StoreUnavailable otherwise (readiness)."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


class ArchiveTier:
    """The archive tier's stores: `state` (ArchiveStateStore, Redis), `archive`
    (ArchiveStore, CQL), `conversations` (ConversationStateStore, CQL), `cold` (the
    MessageStore over the archive alone), `hot` (HotHistory, Redis)."""

    def __init__(self, redis_client: Any, scylla: ScyllaConfig, owns_redis: bool = False) -> None:
        from qim.stores.cql.backend import CqlBackend  # the drivers are imported only here
        from qim.stores.redis.archive import RedisArchiveState
        from qim.stores.redis.hot import RedisHotHistory

        self._redis = redis_client
        self._owns_redis = owns_redis
        self.cql = CqlBackend(scylla)
        self.state: ArchiveStateStore = RedisArchiveState(redis_client)
        self.hot = RedisHotHistory(redis_client)
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
            await self._redis.aclose()


class TieredStores:
    """The Redis stores with MessageStore = TieredMessageStore over the archive tier."""

    name = "tiered"

    def __init__(self, redis_backend: Any, tier: ArchiveTier, tiered_reads: bool) -> None:
        from qim.stores.tiered import TieredMessageStore

        self.redis = redis_backend
        self.archive_tier: Optional[ArchiveTier] = tier
        self.messages: MessageStore = (TieredMessageStore(tier.hot, tier.cold) if tiered_reads
                                       else redis_backend.messages)
        self.commits: CommitStore = redis_backend.commits
        self.leases: ClockLeaseStore = redis_backend.leases
        self.groups: GroupStore = redis_backend.groups
        self.mailboxes: MailboxStore = redis_backend.mailboxes
        self.sessions: SessionStore = redis_backend.sessions
        self.reads: ReadPositionStore = redis_backend.reads
        self.epochs: SessionEpochStore = redis_backend.epochs

    async def check(self, commit_facts: bool, allow_unsafe_dev: bool) -> None:
        """The Redis deployment checks, then the CQL schema check. An archive that does not
        answer at start is logged, not fatal: sends and reads above the hot floor need
        only Redis (the trimmer and reads below the floor wait for it); a keyspace that
        answers but is missing, old or refused is an EngineError."""
        await self.redis.check(commit_facts, allow_unsafe_dev)
        assert self.archive_tier is not None
        try:
            await self.archive_tier.check()
        except StoreUnavailable as exc:
            logger.warning("archive tier unreachable at start (%s); reads below the hot floor fail until it answers",
                           exc)

    async def ping(self) -> None:
        """Redis answers (the commit path's readiness); StoreUnavailable otherwise. The
        archive's own liveness: `archive_tier.ping()`."""
        await self.redis.ping()

    async def close(self) -> None:
        """Close the CQL session, then the Redis pool."""
        assert self.archive_tier is not None
        await self.archive_tier.close()
        await self.redis.close()


def open_stores(redis_addr: str, *, mailbox_retention_ms: int = MAILBOX_RETENTION_MS_DEFAULT,
                tier: Optional[TierConfig] = None) -> Stores:
    """The stores over the Redis at 'host:port' (connections are made lazily), with the
    archive tier when `tier` names a CQL cluster (reads tiered when its backend is
    "tiered"). ValueError for a bad address."""
    from qim.stores.redis.backend import RedisBackend  # the driver is imported only here

    archive = tier is not None and tier.scylla is not None
    backend = RedisBackend(redis_addr, mailbox_retention_ms, first_registrations=archive)
    if tier is None or tier.scylla is None:
        return backend
    return TieredStores(backend, ArchiveTier(backend.client, tier.scylla), tier.tiered)


def open_archive_tier(redis_addr: str, scylla: ScyllaConfig) -> ArchiveTier:
    """The archive tier alone (qim-archiver, qimctl), with a Redis client of its own."""
    from qim.infra.redis.client import connect

    return ArchiveTier(connect(redis_addr), scylla, owns_redis=True)


def open_registry(addr: str) -> "ShardRegistry":
    """The ShardRegistry on the Redis at 'host:port' (QIM_REGISTRY_REDIS_ADDR, default
    QIM_REDIS_ADDR), with a client of its own. ValueError for a bad address."""
    from qim.infra.redis.client import connect
    from qim.stores.redis.registry import RedisShardRegistry

    return RedisShardRegistry(connect(addr, max_connections=8), owns_client=True)
