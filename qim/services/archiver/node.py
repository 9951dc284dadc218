"""ArchiverNode: the qim-archiver process around the HistoryArchiver (docs/design.md §2, §5
step 7; docs/decisions/0023). Unhealthy while the archiver is positioning or failed closed (the
reason in /healthz, `qim_archiver_unarchivable_records_total` > 0 when it stopped on a
record); a restart resumes from its position in Redis. Storage from
qim.stores.open.open_archive_tier (Redis for the position, watermark and retention
classes; CQL for the rows). Metrics on QIM_ARCHIVER_METRICS_LISTEN (9107).

Several archivers (docs/design.md §13; docs/decisions/0041-scale-outbox-partitions.md): the
Outbox partitions are leased from the ShardRegistry (kind "archiver") by a ShardKeeper;
an archiver archives only the partitions it holds, from their fenced positions.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Iterator

from qim.cluster.keeper import ShardKeeper
from qim.cluster.metrics import ShardMetrics
from qim.config.archiver import ArchiverConfig
from qim.config.registry import RegistryConfig
from qim.faults import ARCHIVER_POINTS, FaultPoints
from qim.obs.node import ServiceNode
from qim.services.archiver.archiver import HistoryArchiver
from qim.services.archiver.metrics import ArchiverMetrics
from qim.stores.errors import StorageError
from qim.stores.open import open_archive_tier, open_registry

logger = logging.getLogger(__name__)

WATCH_S = 2.0


class ArchiverNode(ServiceNode):
    """Wires the archive tier and the HistoryArchiver; the archiver runs as a supervised task."""

    service = "archiver"

    def __init__(self, config: ArchiverConfig) -> None:
        super().__init__(config.metrics_listen)
        self.config = config
        self.metrics = ArchiverMetrics(self.registry)
        self.tier = open_archive_tier(config.common.redis_layout, config.scylla)
        reg = config.registry or RegistryConfig(config.common.redis_addr, f"archiver@{config.metrics_listen}")
        self.shard_registry = open_registry(reg.redis_addr)
        # the partition count is read from the broker in setup() (HistoryArchiver.start)
        self.keeper = ShardKeeper(self.shard_registry, "archiver", reg.node_id, 0, reg.lease_ms, reg.renew_ms,
                                  addr=config.metrics_listen, on_acquire=self._acquire, on_release=self._release,
                                  metrics=ShardMetrics(self.registry))
        self.archiver = HistoryArchiver(config.common.kafka_bootstrap, self.tier.state, self.tier.archive,
                                        config.batch_size, config.common.tier.default_retention_days,
                                        FaultPoints(config.fault_point, ARCHIVER_POINTS), self.metrics,
                                        partitions=(), on_lost=self.keeper.refused)
        self._cql_ok = False
        self.always_zero(self.metrics.unarchivable)
        self.closing(self.shard_registry.close, "shard registry")
        self.closing(self.tier.close, "archive tier")
        self.closing(self.archiver.close, "outbox consumer")
        self.closing(self.keeper.stop, "partition leases")  # first: stop, release, leave

    async def _acquire(self, partition: int, owner_epoch: int) -> None:
        await self.archiver.add_partition(partition, owner_epoch)

    async def _release(self, partition: int, reason: str) -> None:
        await self.archiver.remove_partition(partition, reason)

    def not_ready(self) -> Iterator[str]:
        """Not joined / leases ended; the archiver's reason (positioning, failed closed); CQL reachability."""
        yield from self.keeper.not_ready()
        reason = self.archiver.not_ready()
        if reason:
            yield reason
        if not self._cql_ok:
            yield "cql unreachable"

    async def _watch(self) -> None:
        while True:
            try:
                await self.tier.ping()
                self._cql_ok = True
            except StorageError:
                self._cql_ok = False
            await asyncio.sleep(WATCH_S)

    async def setup(self) -> None:
        """Check the schema, position the archiver, then run it (EngineError when an
        engine is unreachable or the keyspace is not current)."""
        await self.tier.check()
        self._cql_ok = True
        await self.archiver.start()
        self.keeper.count = self.archiver.partition_count
        await self.keeper.join()  # JoinRefused (a ConfigError) when the node id is in use
        self.spawn(self._watch(), "cql watch")
        self.spawn(self.archiver.run(), "archiver")
        self.spawn(self.keeper.run(), "partition leases")
        logger.info("archiver %s running over %d outbox partitions", self.keeper.node_id,
                    self.archiver.partition_count)
