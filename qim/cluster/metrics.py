"""Metrics of a node's ShardKeeper (qim/cluster/keeper.py), on the node's registry
(qim/obs/metrics.py). Labels: the kind and a bounded reason, never a shard or node id."""

from __future__ import annotations

from typing import Optional

from prometheus_client import CollectorRegistry

from qim.obs.metrics import MetricSet


class ShardMetrics(MetricSet):
    """Every qim_shard_* and qim_registry_* metric of one node."""

    def __init__(self, registry: Optional[CollectorRegistry] = None) -> None:
        super().__init__(registry)
        self.owned = self.gauge("qim_shard_owned", "Shards this node serves now", ["kind"])
        self.acquired = self.counter("qim_shard_acquired", "Shard leases granted to this node", ["kind"])
        self.released = self.counter("qim_shard_released", "Shards given up (rebalance, clean stop)",
                                     ["kind", "reason"])
        self.lost = self.counter("qim_shard_lost", "Shards this node stopped serving without giving them up: "
                                 "taken (the registry names another owner), refused (a write was fenced), "
                                 "lapsed (the lease ended without a renewal), gone (the node id was taken)",
                                 ["kind", "reason"])
        # renewed late (a stall, the registry away): whether the shards were kept or lost
        self.lapses = self.counter("qim_node_lease_lapses", "Times this node's lease lapsed before it was renewed",
                                   ["kind"])
        self.registry_failures = self.counter("qim_registry_failures", "Registry calls that failed or timed out",
                                              ["kind", "call"])
        self.lease_left = self.gauge("qim_registry_lease_seconds_left",
                                     "Time this node's leases stay valid without another renewal", ["kind"])
