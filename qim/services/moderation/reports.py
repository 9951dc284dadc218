"""Report delivery: every user report (REPORT, qim/services/writer/reports.py) to the
operator's QIM_MODERATION_NOTIFY_URL, at least once (docs/decisions/0124-user-reports.md).

A report stays in the ReportStore's undelivered set (Redis home instance) until the
receiver answered 2xx for a POST carrying it: a receiver that is down, slow or answering
500 gets the same reports again with jittered backoff (0.2 s doubling to 5 s), a crash of
a qim-moderation node loses nothing (the set is in Redis). Several nodes may post the same
report: the receiver deduplicates by `report_id`.

Request: `POST <url>`, JSON `{"reports": [{report_id, at_ms, tenant, reporter, device,
conversation_id (hex), message_id (hex), peer, sender, reason, text}, ...]}`, signed as the
notifications (X-QIM-Timestamp, X-QIM-Signature; decision 0114 item 2).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from typing import Any

from qim.obs.metrics import MetricSet
from qim.services.moderation.poster import SignedPoster
from qim.stores.errors import StoreUnavailable
from qim.stores.reports import ReportStore

logger = logging.getLogger(__name__)

IDLE_S = 1.0  # the undelivered set is read again this often when it was empty
BACKOFF_MIN_S = 0.2
BACKOFF_MAX_S = 5.0
FIELDS = ("at_ms", "tenant", "reporter", "device", "conversation_id", "message_id", "peer", "sender", "reason", "text")


class ReportMetrics(MetricSet):
    """qim_moderation_reports_{delivered_total, attempts_total{outcome}, undelivered}."""

    def __init__(self, registry: Any = None) -> None:
        super().__init__(registry)
        self.delivered = self.counter("qim_moderation_reports_delivered", "Reports the receiver accepted (2xx)")
        self.attempts = self.counter(
            "qim_moderation_reports_attempts",
            "POSTs of a report batch by outcome (ok, status, unreachable, timeout)",
            ["outcome"],
        )
        self.undelivered = self.gauge(
            "qim_moderation_reports_undelivered", "Reports read for delivery and not yet accepted by the receiver"
        )


def report_json(rep: dict[str, str]) -> dict[str, Any]:
    """The JSON object of one stored report (module doc)."""
    return {"report_id": rep["id"], **{k: rep.get(k, "") for k in FIELDS}}


class ReportDelivery:
    """The delivery loop (module doc); `run()` until cancelled."""

    def __init__(
        self,
        store: ReportStore,
        url: str,
        secret: str,
        ca_file: str,
        batch: int,
        timeout_ms: int,
        metrics: ReportMetrics,
    ) -> None:
        self.store, self.url, self.secret, self.batch = store, url, secret, batch
        self.timeout_s = timeout_ms / 1000
        self.metrics = metrics
        self.poster = SignedPoster(url, secret, ca_file, timeout_ms / 1000)

    async def close(self) -> None:
        """Close the HTTP session and the Redis client."""
        await self.poster.close()
        await self.store.close()

    async def run(self) -> None:
        """Read the undelivered reports, POST them until a 2xx, mark them delivered, forever."""
        self.poster.start()
        delay = BACKOFF_MIN_S
        while True:
            try:
                reps = await self.store.undelivered(self.batch)
            except StoreUnavailable as exc:  # Redis away: try again, nothing is lost
                logger.warning("reports not read (%s); retrying", type(exc).__name__)
                await asyncio.sleep(random.uniform(delay / 2, delay))
                delay = min(BACKOFF_MAX_S, delay * 2)
                continue
            self.metrics.undelivered.set(len(reps))
            if not reps:
                await asyncio.sleep(IDLE_S)
                continue
            outcome = await self.poster.post(
                json.dumps({"reports": [report_json(r) for r in reps]}, separators=(",", ":")).encode()
            )
            self.metrics.attempts.labels(outcome=outcome).inc()
            if outcome != "ok":
                logger.info("report receiver: %s; retrying %d reports in %.1fs", outcome, len(reps), delay)
                await asyncio.sleep(random.uniform(delay / 2, delay))
                delay = min(BACKOFF_MAX_S, delay * 2)
                continue
            delay = BACKOFF_MIN_S
            try:
                await self.store.delivered([r["id"] for r in reps])
            except StoreUnavailable as exc:  # they are posted again: the receiver dedupes by report_id
                logger.warning("delivered reports not marked (%s): they will be posted again", type(exc).__name__)
            self.metrics.delivered.inc(len(reps))
