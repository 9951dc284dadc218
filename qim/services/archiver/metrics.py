"""Metrics of the HistoryArchiver (qim-archiver), created per node (qim/obs/metrics.py)."""

from __future__ import annotations

from typing import Optional

from prometheus_client import CollectorRegistry

from qim.obs.metrics import MetricSet


class ArchiverMetrics(MetricSet):
    """Every qim_archiver_* metric."""

    def __init__(self, registry: Optional[CollectorRegistry] = None) -> None:
        super().__init__(registry)
        self.records = self.counter("qim_archiver_records", "Outbox records archived (written or already expired)")
        self.rows_written = self.counter("qim_archiver_messages_written", "Messages written to the archive")
        self.state_changes = self.counter("qim_archiver_state_changes", "Recalls/deletes applied to archived rows")
        self.expired = self.counter("qim_archiver_expired_skipped",
                                    "Messages past their retention when archived (not written)")
        self.batch_records = self.histogram("qim_archiver_batch_records", "Outbox records per archiver batch",
                                            buckets=(1, 4, 16, 64, 256, 512, 1024, 4096))
        self.batch_seconds = self.histogram("qim_archiver_batch_write_seconds", "Archive writes of one batch")
        self.write_failures = self.counter("qim_archiver_write_failures",
                                           "Batch writes that failed (the batch is written again)")
        self.position = self.gauge("qim_archiver_outbox_position", "Next Outbox offset to archive")
        self.lag = self.gauge("qim_archiver_outbox_lag", "Outbox records not yet archived")
        self.watermark = self.gauge("qim_archiver_watermark_ms", "The archive watermark (unix ms)")
        self.watermark_lag = self.gauge("qim_archiver_watermark_lag_seconds", "Now minus the archive watermark")
        self.fenced = self.counter("qim_archiver_fenced_writes",
                                   "Position advances refused because a newer owner fenced the partition")
        self.unarchivable = self.counter("qim_archiver_unarchivable_records",
                                         "Outbox records the archiver stopped at (must stay 0)")
