"""Metrics of a ConversationWriter (qim-writer), created per node (qim/obs/metrics.py)."""

from __future__ import annotations

from typing import Optional

from prometheus_client import CollectorRegistry

from qim.obs.metrics import MetricSet


class WriterMetrics(MetricSet):
    """Every qim_writer_* metric. The bad-input test reads `qim_writer_requests_total`
    to prove malformed client input never reached a writer."""

    def __init__(self, registry: Optional[CollectorRegistry] = None) -> None:
        super().__init__(registry)
        self.requests = self.counter("qim_writer_requests", "Internal requests received by the writer", ["opcode"])
        self.results = self.counter("qim_writer_results", "Client requests by result code", ["result"])
        self.request_seconds = self.histogram("qim_writer_request_seconds", "Time from request to reply", ["op"])
        self.older_published = self.counter(
            "qim_writer_older_commits_published",
            "Unpublished commits of another (crashed) writer published before a newer one")
        self.older_failed = self.counter("qim_writer_older_commit_failures",
                                         "Older commits whose publication failed (left to CommitRecovery)")
        # hot-window trim (qim/services/writer/trimmer.py)
        self.trimmed = self.counter("qim_writer_history_trimmed", "Messages removed from the hot tier (archived)")
        self.trim_blocked = self.counter(
            "qim_writer_history_trim_blocked",
            "Trim steps stopped at a due message the archive does not hold as Redis does (yet)")
        self.trim_failures = self.counter("qim_writer_history_trim_failures", "Trim passes that failed (retried)")
