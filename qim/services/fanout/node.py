"""FanoutNode: the qim-fanout process around the FanoutCoordinator (docs/design.md §5.3).

Unhealthy while the coordinator is not running; when it stops on a record it must not
skip (unplannable: `qim_fanout_unplannable_records_total` > 0) the process stays up and
unhealthy for the operator, and a restart replays from the committed position.
"""

from __future__ import annotations

from typing import Iterator

from qim.config import FanoutConfig
from qim.faults import FANOUT_POINTS, FaultPoints
from qim.obs.node import ServiceNode
from qim.services.fanout.coordinator import FanoutCoordinator
from qim.services.fanout.metrics import FanoutMetrics
from qim.stores.open import open_stores


class FanoutNode(ServiceNode):
    """Wires the coordinator (Outbox consumer, dispatch producer, member snapshots)."""

    service = "fanout"

    def __init__(self, config: FanoutConfig) -> None:
        super().__init__(config.metrics_listen)
        self.config = config
        self.metrics = FanoutMetrics(self.registry)
        self.stores = open_stores(config.common.redis_addr)
        self.coordinator = FanoutCoordinator(config.common.kafka_bootstrap, config.common.shard_count,
                                             config.batch_size, FaultPoints(config.fault_point, FANOUT_POINTS),
                                             self.stores.groups, self.metrics)
        self.always_zero(self.metrics.unplannable)
        self.closing(self.stores.close, "stores")
        self.closing(self.coordinator.close, "outbox consumer and dispatch producer")

    def not_ready(self) -> Iterator[str]:
        """The coordinator is positioning, or stopped (with its reason)."""
        if not self.coordinator.ready:
            reason = self.coordinator.stopped_reason
            yield "fanout not running" + (f": {reason}" if reason else "")

    async def setup(self) -> None:
        """Run the coordinator and the lag exporter as supervised tasks."""
        self.spawn(self.coordinator.run(), "coordinator")
        self.spawn(self.coordinator.lag_loop(), "outbox lag")
