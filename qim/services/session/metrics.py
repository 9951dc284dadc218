"""Metrics of a SessionNode (qim-session), created per node (qim/obs/metrics.py)."""

from __future__ import annotations

from typing import Any, Iterator, Optional

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from qim.obs.metrics import MetricSet

CACHE_EVENTS = ("rebuilt", "yielded", "refreshed", "abandoned")


class SessionMetrics(MetricSet):
    """Every qim_session_* metric. `watch_cache(cache)` exports the session list cache's
    own counters at scrape time (the cache stays free of metric objects)."""

    def __init__(self, registry: Optional[CollectorRegistry] = None) -> None:
        super().__init__(registry)
        self.lag = self.gauge("qim_session_dispatch_lag", "Dispatch records the durable projection has not applied")
        self.registrations = self.counter("qim_session_registrations", "Conversation registrations written",
                                          ["path"])
        self.list_seconds = self.histogram("qim_session_list_seconds", "PULL_SESSION_LIST service time",
                                           ["snapshot"],
                                           buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                                                    2.5))
        self.page_failures = self.counter("qim_session_page_failures", "Session pages failed with ERROR", ["reason"])
        self.presence_bad = self.counter("qim_session_presence_bad_records",
                                         "qim.presence records that did not decode (skipped)")
        self.fenced = self.counter("qim_session_fenced_writes",
                                   "Checkpoint writes refused because a newer owner fenced the shard")
        # issue 33: a shard given up and taken again while a batch was being written
        self.stale_writes = self.counter("qim_session_stale_tenure_writes",
                                         "Checkpoint writes of an earlier tenure of a shard, refused or dropped")
        self.shard_restarts = self.counter("qim_session_shard_restarts",
                                           "Session shards projected again from a fresh read (checkpoint moved)")
        self.mark_reads = self.counter("qim_session_mark_read", "MARK_READ calls", ["moved"])
        self.projection_dropped = self.counter("qim_session_projection_dropped", "Low-latency projections dropped",
                                               ["reason"])
        self.dispatch_records = self.counter("qim_session_dispatch_records",
                                             "Dispatch records projected by the durable consumer")
        # decision 0167: records the low-latency path had written, not written again
        self.durable_skipped = self.counter("qim_session_durable_skipped_records",
                                            "Dispatch records the durable consumer skipped: the low-latency "
                                            "path had written their registrations")
        self.durable_retries = self.counter("qim_session_durable_retries",
                                            "Durable projection batches retried after an outage")
        self.device_frames = self.counter("qim_session_device_frames", "DEVICE_FRAMES queued to gateways",
                                          ["opcode"])
        self.device_frames_dropped = self.counter("qim_session_device_frames_dropped",
                                                  "DEVICE_FRAMES dropped (gateway down or slow)")
        self.bad_oneway = self.counter("qim_session_bad_oneway", "Unknown oneway frames on the session listener")
        # user_conversation_state in CQL (qim/services/session/firstreg.py)
        self.first_registrations = self.counter("qim_session_first_registrations",
                                                "First registrations written to CQL user_conversation_state")
        self.first_registration_failures = self.counter("qim_session_first_registration_failures",
                                                        "Drains of queued first registrations that failed (retried)")
        self.lists_restored = self.counter("qim_session_lists_restored",
                                           "Conversation lists rebuilt from user_conversation_state")
        self.list_restore_failures = self.counter(
            "qim_session_list_restore_failures",
            "Cold list reads that could not check the set against user_conversation_state (served from Redis)")

    def watch_cache(self, cache: Any) -> None:
        """Export `cache`'s event counters and dirty-mark count (SessionListCache)."""
        self.registry.register(_CacheCollector(cache))

    def watch_projected(self, projected: Any) -> None:
        """Export what `projected` (qim/services/session/projected.py) remembers and how
        many it forgot before the durable consumer came (each then written twice)."""
        self.registry.register(_ProjectedCollector(projected))


class _CacheCollector:
    """Reads the cache's plain counters at scrape time."""

    def __init__(self, cache: Any) -> None:
        self._cache = cache

    def collect(self) -> Iterator[Any]:
        c = CounterMetricFamily("qim_session_snapshot_events", "Snapshot cache events", labels=["event"])
        for event in CACHE_EVENTS:
            c.add_metric([event], getattr(self._cache, event))
        yield c
        yield GaugeMetricFamily("qim_session_dirty_marks", "Dirty conversation marks held", self._cache.mark_count)


class _ProjectedCollector:
    """Reads the low-latency path's memory (decision 0167) at scrape time."""

    def __init__(self, projected: Any) -> None:
        self._projected = projected

    def collect(self) -> Iterator[Any]:
        yield GaugeMetricFamily("qim_session_projected_remembered",
                                "Records the low-latency path wrote that the durable consumer has not reached",
                                len(self._projected))
        yield CounterMetricFamily("qim_session_projected_forgotten",
                                  "Records forgotten before the durable consumer reached them (written twice)",
                                  self._projected.forgotten)
