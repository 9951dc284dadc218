"""FanoutNode: the qim-fanout process around the FanoutCoordinator (docs/design.md §5.3).

Unhealthy while the coordinator is not running; when it stops on a record it must not
skip (unplannable: `qim_fanout_unplannable_records_total` > 0) the process stays up and
unhealthy for the operator, and a restart replays from the committed positions.

Several coordinators (docs/design.md §13; docs/decisions/0041-scale-outbox-partitions.md):
the Outbox partitions are leased from the ShardRegistry (kind "fanout") by a
ShardKeeper; a coordinator fans out only the partitions it holds, and a dead one's are
taken over from their committed positions within the lease + one renewal.
"""

from __future__ import annotations

from typing import Iterator

from qim.cluster.keeper import GRACEFUL, ShardKeeper
from qim.cluster.metrics import ShardMetrics
from qim.config import FanoutConfig
from qim.consts import OUTBOX_TOPIC
from qim.errors import ConfigError
from qim.faults import FANOUT_POINTS, FaultPoints
from qim.infra.kafka.bridge import topic_partitions
from qim.obs.node import ServiceNode
from qim.services.fanout.coordinator import FanoutCoordinator
from qim.services.fanout.metrics import FanoutMetrics
from qim.stores.open import open_registry, open_stores


class FanoutNode(ServiceNode):
    """Wires the coordinator (Outbox consumer, dispatch producer, member snapshots) and
    the lease keeper of its Outbox partitions."""

    service = "fanout"

    def __init__(self, config: FanoutConfig) -> None:
        super().__init__(config.metrics_listen)
        self.config = config
        self.metrics = FanoutMetrics(self.registry)
        self.stores = open_stores(config.common.redis_layout)
        if config.registry is None:
            raise ConfigError("qim-fanout needs the ShardRegistry (QIM_REGISTRY_REDIS_ADDR / QIM_REDIS_ADDR)")
        reg = config.registry
        self.coordinator = FanoutCoordinator(config.common.kafka_bootstrap, config.common.shard_count,
                                             config.batch_size, FaultPoints(config.fault_point, FANOUT_POINTS),
                                             self.stores.groups, self.metrics, partitions=())
        self.shard_registry = open_registry(reg.redis_addr)
        # the partition count is read from the broker in setup()
        self.keeper = ShardKeeper(self.shard_registry, "fanout", reg.node_id, 0, reg.lease_ms, reg.renew_ms,
                                  addr=config.metrics_listen, on_acquire=self.coordinator.add_partition,
                                  on_release=self._release, metrics=ShardMetrics(self.registry))
        self.always_zero(self.metrics.unplannable)
        self.closing(self.shard_registry.close, "shard registry")
        self.closing(self.stores.close, "stores")
        self.closing(self.coordinator.close, "outbox consumer and dispatch producer")
        self.closing(self.keeper.stop, "partition leases")  # first: commit, release, leave

    async def _release(self, partition: int, reason: str) -> None:
        await self.coordinator.remove_partition(partition, reason, graceful=reason in GRACEFUL)

    def not_ready(self) -> Iterator[str]:
        """Not joined / leases ended; the coordinator is positioning, or stopped (with its reason)."""
        yield from self.keeper.not_ready()
        if not self.coordinator.ready:
            reason = self.coordinator.stopped_reason
            yield "fanout not running" + (f": {reason}" if reason else "")

    async def setup(self) -> None:
        """Read the Outbox partition count, join the registry (JoinRefused when the node
        id is in use), then run the coordinator, the lag exporter and the leases."""
        self.keeper.count = await topic_partitions(self.config.common.kafka_bootstrap, OUTBOX_TOPIC)
        await self.keeper.join()
        self.spawn(self.coordinator.run(), "coordinator")
        self.spawn(self.coordinator.lag_loop(), "outbox lag")
        self.spawn(self.keeper.run(), "partition leases")
