"""The NotificationService's metrics (docs/decisions/0135): never a user, device or
message id as a label.

- `qim_notify_alerts_total{provider, outcome}`: one per (device, message) that was due,
  by its end: sent, failed, unregistered (the provider said the token is dead: the
  registration was removed), suppressed_online, suppressed_muted, suppressed_read,
  suppressed_recalled, suppressed_expired (older than QIM_NOTIFY_MAX_AGE_MS),
  suppressed_duplicate (made before: a replay; or made or claimed by another node while
  this one was paused or waiting on a Retry-After past its claim, decision 0144). due =
  the sum.
- `qim_notify_silent_total{provider, outcome}`: silent badge updates: sent, failed,
  unregistered, suppressed_online, suppressed_stale (the device already had a newer one).
- `qim_notify_retries_total{provider}`: retryable provider answers retried later.
- `qim_notify_queue_depth`: notifications waiting for a sender (bounded: a full queue
  holds the log consumer), `qim_notify_lag_records`: dispatch records not yet done on
  this node's partitions, `qim_notify_badge_waits_total{result}`: batches that waited for
  the badge to be settled (settled, timeout: sent with the badge as it stood),
  `qim_notify_store_waits_total`: passes of a batch that met an unavailable store (a
  Redis instance down, a MailboxShard marked moving) and were made again after a pause.
"""

from __future__ import annotations

from typing import Any

from qim.obs.metrics import MetricSet

PROVIDERS = ("apns", "fcm", "webpush")
ALERT_OUTCOMES = ("sent", "failed", "unregistered", "suppressed_online", "suppressed_muted", "suppressed_read",
                  "suppressed_recalled", "suppressed_expired", "suppressed_duplicate")
SILENT_OUTCOMES = ("sent", "failed", "unregistered", "suppressed_online", "suppressed_stale")


class NotifyMetrics(MetricSet):
    """The counters and gauges of the module doc."""

    def __init__(self, registry: Any = None) -> None:
        super().__init__(registry)
        self.alerts = self.counter("qim_notify_alerts", "Alerts due per (device, message) by provider and outcome",
                                   ["provider", "outcome"])
        self.silent = self.counter("qim_notify_silent", "Silent badge updates by provider and outcome",
                                   ["provider", "outcome"])
        self.retries = self.counter("qim_notify_retries", "Provider answers retried later", ["provider"])
        self.queue = self.gauge("qim_notify_queue_depth", "Notifications waiting for a sender")
        self.lag = self.gauge("qim_notify_lag_records", "Dispatch records not yet notified (this node's partitions)")
        self.badge_waits = self.counter("qim_notify_badge_waits", "Batches that waited for the badge to settle",
                                        ["result"])
        self.bad_records = self.counter("qim_notify_bad_records", "Dispatch records that do not decode (skipped)")
        self.store_waits = self.counter("qim_notify_store_waits", "Batch passes that met an unavailable store")
        for p in PROVIDERS:  # every series exists from the start: a reconciliation sums them
            for o in ALERT_OUTCOMES:
                self.alerts.labels(p, o)
            for o in SILENT_OUTCOMES:
                self.silent.labels(p, o)
            self.retries.labels(p)
