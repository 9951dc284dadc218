"""Building the stores of a process (docs/decisions/0019-storage-layer.md; the archive
tier: docs/decisions/0023-archive-tier.md): the one place a service's wiring gets its storage
from, so no service module names a driver or a backend.

    stores = open_stores(config.common.redis_layout, mailbox_retention_ms=..., tier=config.common.tier)
    await stores.check(commit_facts=True, allow_unsafe_dev=...)   # at start
    stores.messages / commits / leases / groups / mailboxes / sessions / reads / epochs
    stores.archive_tier   # None without QIM_SCYLLA_ADDRS, else an ArchiveTier

QIM_MAILBOX_STORE=cql puts `mailboxes` on the CQL MailboxStore (qim/stores/cql/mailboxes.py,
docs/decisions/0102) over the archive tier's session; its schema check is fatal at start.
Backends (QIM_MESSAGE_STORE_BACKEND, qim/config/tier.py): "redis" (every store in Redis;
the default without QIM_SCYLLA_ADDRS) and "tiered" (the default with it: MessageStore is
the TieredMessageStore, Redis above each conversation's hot floor and CQL below it).
`open_archive_tier` gives the HistoryArchiver and qimctl the archive tier alone.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from qim.config.redislayout import RedisLayout
from qim.config.tier import ScyllaConfig, TierConfig
from qim.consts import MAILBOX_RETENTION_MS_DEFAULT
from qim.stores.badges import BadgeStore
from qim.stores.base import Stores
from qim.stores.errors import StoreUnavailable
from qim.stores.notify import NotifyStore
from qim.stores.reactions import ReactionStore
from qim.stores.registry import ShardRegistry
from qim.stores.reports import ReportStore
from qim.stores.tier import ArchiveTier

logger = logging.getLogger(__name__)

__all__ = ["ArchiveTier", "Stores", "TieredStores", "open_archive_tier", "open_reactions", "open_registry", "open_stores"]


class TieredStores(Stores):
    """The Redis stores with MessageStore = TieredMessageStore over the archive tier
    (`tiered_reads`; the Redis MessageStore otherwise) and the tier itself."""

    name = "tiered"

    def __init__(self, redis_backend: Stores, tier: ArchiveTier, tiered_reads: bool) -> None:
        from qim.stores.tiered import TieredMessageStore

        super().__init__(**{**redis_backend.stores_of(), "archive_tier": tier})
        self.redis = redis_backend
        if tiered_reads:
            self.messages = TieredMessageStore(tier.hot, tier.cold)

    async def check(self, commit_facts: bool, allow_unsafe_dev: bool) -> None:
        """The Redis deployment checks, then the CQL schema check. An archive that does not
        answer at start is logged, not fatal: sends and reads above the hot floor need
        only Redis (the trimmer and reads below the floor wait for it); a keyspace that
        answers but is missing, old or refused is an EngineError."""
        await self.redis.check(commit_facts, allow_unsafe_dev)
        assert self.archive_tier is not None
        check_mailboxes = getattr(self.mailboxes, "check", None)
        if check_mailboxes is not None:  # the CQL MailboxStore: without its tables nothing materializes
            await check_mailboxes()
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


def open_stores(redis: "RedisLayout | str", *, mailbox_retention_ms: int = MAILBOX_RETENTION_MS_DEFAULT,
                tier: Optional[TierConfig] = None) -> Stores:
    """The stores over the Redis instances of `redis` (a RedisLayout, or one 'host:port'
    holding every role; connections are made lazily), with the archive tier when `tier`
    names a CQL cluster (reads tiered when its backend is "tiered"). ValueError for a
    bad address."""
    from qim.stores.redis.backend import RedisBackend  # the driver is imported only here

    archive = tier is not None and tier.scylla is not None
    backend = RedisBackend(redis, mailbox_retention_ms, first_registrations=archive)
    if tier is None or tier.scylla is None:
        return backend
    stores = TieredStores(backend, ArchiveTier(backend.topology, tier.scylla), tier.tiered)
    if tier.mailbox_store == "cql":  # QIM_MAILBOX_STORE=cql (docs/decisions/0102)
        from qim.stores.cql.mailboxes import CqlMailboxStore

        assert stores.archive_tier is not None
        stores.mailboxes = CqlMailboxStore(stores.archive_tier.cql.session, mailbox_retention_ms)
    return stores


def open_reactions(stores: Stores) -> ReactionStore:
    """The ReactionStore over the same Redis instances as `stores` (its conversation keys
    are in the commit buckets of those instances; docs/decisions/0121)."""
    from qim.stores.redis.reactions import RedisReactionStore

    backend: Any = getattr(stores, "redis", stores)  # TieredStores wraps the Redis backend
    return RedisReactionStore(backend.topology)


def open_badges(stores: Stores) -> BadgeStore:
    """The BadgeStore (UserBadgeState, decision 0129) over the mailbox instances of `stores`."""
    from qim.stores.redis.badges import RedisBadgeStore

    backend: Any = getattr(stores, "redis", stores)  # TieredStores wraps the Redis backend
    return RedisBadgeStore(backend.topology)


def open_notify(stores: Stores) -> NotifyStore:
    """The NotifyStore (the NotificationService's state, decision 0135) over the mailbox instances of `stores`."""
    from qim.stores.redis.notify import RedisNotifyStore

    backend: Any = getattr(stores, "redis", stores)  # TieredStores wraps the Redis backend
    return RedisNotifyStore(backend.topology)


def open_reports(stores: Stores) -> ReportStore:
    """The ReportStore on the home instance of `stores` (the writer's REPORT; decision 0124)."""
    from qim.stores.redis.reports import RedisReportStore

    backend: Any = getattr(stores, "redis", stores)  # TieredStores wraps the Redis backend
    return RedisReportStore(backend.topology.home, owns_client=False)


def open_report_store(redis: "RedisLayout | str") -> ReportStore:
    """A ReportStore with a Redis client of its own on the home instance (qim-moderation)."""
    from qim.infra.redis.client import connect
    from qim.stores.redis.reports import RedisReportStore

    layout = redis if isinstance(redis, RedisLayout) else RedisLayout.single(redis)
    return RedisReportStore(connect(layout.home, max_connections=4))


def open_archive_tier(redis: "RedisLayout | str", scylla: ScyllaConfig) -> ArchiveTier:
    """The archive tier alone (qim-archiver, qimctl), with Redis clients of its own."""
    from qim.stores.redis.topology import topology_of

    return ArchiveTier(topology_of(redis), scylla, owns_redis=True)


def open_registry(addr: str) -> ShardRegistry:
    """The ShardRegistry on the Redis at 'host:port' (QIM_REGISTRY_REDIS_ADDR, default
    QIM_REDIS_ADDR), with a client of its own. ValueError for a bad address."""
    from qim.infra.redis.client import connect
    from qim.stores.redis.registry import RedisShardRegistry

    return RedisShardRegistry(connect(addr, max_connections=8), owns_client=True)


class RedisPlacement:
    """What a service asks of the MailboxShard placement map (docs/decisions/0104),
    whatever Stores it opened: `moving_shards()` (no keeper may hold them) and
    `await load()` (read it now and keep it current; StoreCorrupt for a map naming an
    instance outside the layout, StoreUnavailable when the home is down). `registry`:
    the node's Prometheus registry, to show qim_redis_placement_refresh_errors_total."""

    def __init__(self, stores: Stores, registry: Any = None) -> None:
        from qim.stores.redis.placement import REFRESH_ERRORS

        backend: Any = getattr(stores, "redis", stores)  # TieredStores wraps the Redis backend
        self._backend = backend
        self.moving_shards = backend.topology.moving_shards
        if registry is not None:
            registry.register(REFRESH_ERRORS)

    async def load(self) -> None:
        """Read the map now (a service's start)."""
        await self._backend.load_placement()
