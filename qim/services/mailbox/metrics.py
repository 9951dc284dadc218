"""Metrics of a MailboxNode (qim-mailbox), created per node (qim/obs/metrics.py)."""

from __future__ import annotations

from typing import Optional

from prometheus_client import CollectorRegistry

from qim.obs.metrics import LATENCY_BUCKETS, MetricSet


class MailboxMetrics(MetricSet):
    """Every qim_mailbox_* metric. Built by the node on its registry and passed to the
    materializer, the push links and the projection feed. The backlog and link gauges
    are read from the links at scrape time (`watch_push_links`)."""

    def __init__(self, registry: Optional[CollectorRegistry] = None) -> None:
        super().__init__(registry)
        # the materializer
        self.records = self.counter("qim_mailbox_records", "Dispatch records materialized", ["status"])
        self.entries = self.counter("qim_mailbox_entries",
                                    "Mailbox entries appended (one per recipient of a record materialized here)")
        self.dirty = self.counter("qim_mailbox_dirty", "Shards stopped by MailboxDirty (must stay 0)")
        self.stage = self.send_stages()  # materialize: one fused call of a shard's records (retries included)
        self.batch = self.histogram("qim_mailbox_batch_records",
                                    "Dispatch records of one shard materialized in one call (a shard's backlog)",
                                    buckets=(1, 2, 4, 8, 16, 32, 64))
        self.fenced = self.counter("qim_mailbox_fenced_writes",
                                   "Writes refused because a newer owner fenced the shard (the shard stopped here)")
        self.retries = self.counter("qim_mailbox_store_retries", "Fused calls retried after a Redis failure")
        self.overtakes = self.counter("qim_mailbox_overtakes",
                                      "Direct records finished before group records queued ahead (decision 0142)")
        self.turns = self.counter("qim_mailbox_turns",
                                  "Shard worker turns by kind: direct (a direct record queued) or bulk (decision 0148)",
                                  ["kind"])
        # commit (the message's created_at_ms, the writer's clock) to materialized here:
        # where a direct message waits beside a group's burst (issue 41; decision 0148)
        self.record_age = self.histogram("qim_mailbox_record_age_seconds",
                                         "Message commit to its record materialized, by conversation kind",
                                         ["kind"], LATENCY_BUCKETS)
        # the broker's append (LogAppendTime) to the record read into its shard's FIFO, direct
        # conversations' records only: the dispatch log's share of a direct message's wait
        self.direct_read_lag = self.histogram("qim_mailbox_direct_read_lag_seconds",
                                              "Dispatch append to read, direct conversations' records")
        self.pauses = self.counter("qim_mailbox_partition_pauses", "Partitions paused because their FIFO was full")
        self.queued = self.gauge("qim_mailbox_queued_records", "Records queued in shard FIFOs")
        # progress of the dispatch consumer (materializer.lag_loop): records behind the
        # broker, and the sum over owned shards of the materialized watermark W (rises
        # while records flow; flat with a lag above zero = a stalled watermark)
        self.lag = self.gauge("qim_mailbox_dispatch_lag", "Dispatch records not yet materialized (owned shards)")
        self.watermark = self.gauge("qim_mailbox_watermark", "Sum of the materialized watermark W of the owned shards")
        self.dp_gc = self.counter("qim_mailbox_dispatch_progress_gc", "DispatchProgress entries garbage collected")
        # push links to gateways (pushlink.py)
        self.push_sent = self.counter("qim_mailbox_push_batches", "PushBatch frames queued to gateways")
        self.push_dropped = self.counter("qim_mailbox_push_dropped", "PushBatch frames dropped (repaired by a wake-up)",
                                         ["reason"])
        self.push_flushed = self.counter("qim_mailbox_push_backlog_flushed",
                                         "PushBatch frames sent from a backlog after a reconnect")
        self.push_wakes = self.counter("qim_mailbox_push_wake_requests",
                                       "wake_all requests sent to gateways after dropped pushes")
        self.push_backlog = self.gauge("qim_mailbox_push_backlog_bytes", "PushBatch bytes waiting for a gateway link")
        self.push_links_up = self.gauge("qim_mailbox_push_links_up", "Gateway push links connected and greeted")
        # the PresenceDirectory (targets.py; docs/decisions/0042-scale-presence.md)
        self.push_gateways = self.histogram("qim_mailbox_push_gateways",
                                            "Gateways one materialized record was pushed to (one frame each)",
                                            buckets=(0, 1, 2, 3, 4, 8, 16, 64))
        self.inline_pushes = self.counter("qim_mailbox_inline_pushes",
                                          "Recipient users whose push carried their entries inline (decisions/0156)")
        self.presence_bad = self.counter("qim_mailbox_presence_bad_records",
                                         "qim.presence records that did not decode (skipped)")
        self.kicks_requested = self.counter("qim_mailbox_kicks_requested",
                                            "Older sessions of a device asked to be kicked on their gateway")
        # the low-latency projection feed to session nodes (projection.py)
        self.projection_frames = self.counter("qim_mailbox_projection_frames",
                                              "PROJECTION frames queued to session nodes")
        self.projection_dropped = self.counter("qim_mailbox_projection_dropped",
                                               "PROJECTION frames dropped (session node down or slow)")

    def watch_push_links(self, links) -> None:
        """Export the backlog bytes and live links of `links` (PushLink objects)."""
        self.push_backlog.set_function(lambda: float(sum(link.backlog_bytes for link in links)))
        self.push_links_up.set_function(lambda: float(sum(1 for link in links if link.live)))
