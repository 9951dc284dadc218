"""Metrics of the FanoutCoordinator (qim-fanout), created per node (qim/obs/metrics.py)."""

from __future__ import annotations

from typing import Optional

from prometheus_client import CollectorRegistry

from qim.obs.metrics import MetricSet


class FanoutMetrics(MetricSet):
    """Every qim_fanout_* metric."""

    def __init__(self, registry: Optional[CollectorRegistry] = None) -> None:
        super().__init__(registry)
        self.batch_records = self.histogram("qim_fanout_batch_records", "Outbox records per batch",
                                            buckets=(1, 4, 16, 64, 256, 512, 1024))
        self.delivery_wait = self.histogram("qim_fanout_delivery_wait_seconds",
                                            "Wait for all dispatch deliveries of a batch")
        # where a direct message waits beside a group (issue 41): the Outbox append (the
        # broker's LogAppendTime) to its read here, and its dispatch's produce to delivery
        self.direct_read_lag = self.histogram("qim_fanout_direct_read_lag_seconds",
                                              "Outbox append to read, direct conversations' records")
        self.direct_delivery = self.histogram("qim_fanout_direct_delivery_seconds",
                                              "Produce to delivered, direct conversations' dispatch records")
        self.in_flight = self.gauge("qim_fanout_batches_in_flight",
                                    "Batches produced and not yet settled (delivery window, decision 0162)")
        self.stage = self.send_stages()  # fanout: one Outbox batch planned, dispatched, delivered
        self.offset_commit = self.histogram("qim_fanout_offset_commit_seconds", "Synchronous source offset commit")
        self.dispatches = self.counter("qim_fanout_dispatches", "Dispatch records produced")
        self.replays = self.counter("qim_fanout_batch_replays", "Batches re-read after a failure")
        self.position = self.gauge("qim_fanout_outbox_position", "Next Outbox offset to read")
        self.lag = self.gauge("qim_fanout_outbox_lag", "Outbox records not yet fanned out (high watermark - position)")
        self.unplannable = self.counter("qim_fanout_unplannable_records",
                                        "Outbox records that could not be planned (must stay 0)")
