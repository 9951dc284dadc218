"""After-send notifications: every Outbox record, at least once, batched and signed, to
the operator's QIM_MODERATION_NOTIFY_URL (issue 38; docs/decisions/0123-moderation-notify.md).

The position is the Kafka consumer group `qim-moderation-notify` on the Outbox topic the
fanout and the archiver read: its offsets are committed only after the receiver answered
2xx for the batch, so a crash, a SIGKILL or a receiver that is down loses nothing (the
group hands the partitions of a dead node to the others, which resume at the committed
offsets). A batch that fails is retried, the same records in the same order, with bounded
jittered backoff and never skipped: a slow or failing receiver makes the group lag
(`qim_moderation_notify_lag_records`, `qim_moderation_notify_lag_seconds`, the alert
QimModerationNotifyLagging), it does not drop. Duplicates happen only when a node dies
(or loses its partitions) between the receiver's 2xx and the commit; each notification
carries its `message_id` so the receiver recognises them. The in-memory stage is the one
batch being delivered: bounded by QIM_MODERATION_NOTIFY_BATCH, nothing is dropped.

Request: `POST <url>`, JSON `{"notifications": [...]}`, each {`message_id`,
`conversation_id` (hex), `conversation_seq`, `tenant` (decimal string), `sender`
{user_id, device_id}, `client_message_id` (hex), `message_type`, `event_type`,
`created_at_ms`, `body` (base64), `text` (UTF-8 or null), `partition`, `offset`},
signed as the before-send request (X-QIM-Timestamp, X-QIM-Signature; decision 0114).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import random
import time
from typing import Any, Optional

from confluent_kafka import TopicPartition

from qim.consts import KAFKA_BATCH_FETCH, OUTBOX_TOPIC
from qim.errors import EngineError
from qim.infra.kafka.consumer import AsyncConsumer
from qim.obs.metrics import MetricSet
from qim.services.moderation.poster import SignedPoster
from qim.wire import outbox as outbox_codec

logger = logging.getLogger(__name__)

GROUP_ID = "qim-moderation-notify"
BACKOFF_MIN_S = 0.2
BACKOFF_MAX_S = 5.0
LAG_PERIOD_S = 2.0  # the record lag is re-read from the broker at most this often


class NotifyMetrics(MetricSet):
    """qim_moderation_notify_{delivered_total, attempts_total{outcome}, lag_records,
    lag_seconds, commit_failures_total, dropped_total} (dropped: always 0, the stage only
    blocks; kept so the alert rule and dashboards can name it)."""

    def __init__(self, registry: Any = None) -> None:
        super().__init__(registry)
        self.delivered = self.counter("qim_moderation_notify_delivered", "Notifications the receiver accepted (2xx)")
        self.attempts = self.counter(
            "qim_moderation_notify_attempts",
            "POSTs of a notification batch by outcome (ok, status, unreachable, timeout)",
            ["outcome"],
        )
        self.lag_records = self.gauge(
            "qim_moderation_notify_lag_records",
            "Outbox records not yet accepted by the receiver (partitions of this node)",
        )
        self.lag_seconds = self.gauge(
            "qim_moderation_notify_lag_seconds",
            "Age of the oldest record not yet accepted by the receiver (0: caught up)",
        )
        self.commit_failures = self.counter(
            "qim_moderation_notify_commit_failures",
            "Offset commits refused after a delivery (a rebalance: duplicates follow)",
        )
        self.dropped = self.counter("qim_moderation_notify_dropped", "Notifications dropped (the stage never drops)")


class GroupConsumer(AsyncConsumer):
    """AsyncConsumer that joins a consumer group (subscribe) instead of an assignment:
    several ModerationService nodes share the Outbox partitions and a dead one's are
    handed to the others (Kafka's group protocol, cooperative-sticky)."""

    async def subscribe(self, topic: str) -> None:
        """Join the group on `topic`."""
        await self._run(self._consumer.subscribe, [topic])

    async def assigned(self) -> list[int]:
        """The partitions this member holds now."""
        return [tp.partition for tp in await self._run(self._consumer.assignment)]

    async def commit_many(self, topic: str, next_offsets: dict[int, int]) -> None:
        """Synchronously commit {partition: next offset to read}; EngineError when refused."""
        tps = [TopicPartition(topic, p, o) for p, o in next_offsets.items()]
        await self._run(lambda: self._consumer.commit(offsets=tps, asynchronous=False))


def notification(msg: Any) -> dict[str, Any]:
    """The JSON object of one Outbox message (module doc); OutboxDecodeError for a bad one."""
    out = outbox_codec.decode(msg.value())
    rec = out.record
    try:
        text: Optional[str] = rec.body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {
        "message_id": rec.message_id.hex(),
        "conversation_id": rec.conversation_id.hex(),
        "conversation_seq": rec.conversation_seq,
        "tenant": str(int.from_bytes(rec.tenant_id, "big")),
        "sender": {"user_id": rec.sender_id, "device_id": rec.sender_device_id},
        "client_message_id": rec.client_message_id.hex(),
        "message_type": int(rec.message_type),
        "event_type": out.event_type,
        "created_at_ms": rec.created_at_ms,
        "body": base64.b64encode(rec.body).decode(),
        "text": text,
        "partition": msg.partition(),
        "offset": msg.offset(),
    }


class Notifier:
    """The delivery loop (module doc). `run()` until cancelled; `failing` names the last
    failed POST's outcome ("" after a success)."""

    def __init__(
        self,
        bootstrap: str,
        url: str,
        secret: str,
        ca_file: str,
        batch: int,
        timeout_ms: int,
        metrics: NotifyMetrics,
        group_id: str = GROUP_ID,
    ) -> None:
        self.url, self.secret, self.batch, self.timeout_s = url, secret, batch, timeout_ms / 1000
        self.metrics = metrics
        self.consumer = GroupConsumer(
            bootstrap,
            group_id,
            {
                **KAFKA_BATCH_FETCH,
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 1000,
            },
        )
        self.poster = SignedPoster(url, secret, ca_file, timeout_ms / 1000)
        self._next: dict[int, int] = {}  # partition -> next offset this node has delivered up to
        self._lag_at = 0.0
        self.failing = ""  # why the last POST failed ("" when it succeeded)
        self.joined = False

    def not_ready(self) -> Optional[str]:
        """Not ready ("joining the notify consumer group") until subscribed, then None: a failing
        receiver is the lag metric's and its alert's business, not a reason to restart
        this node (a restart would not heal the receiver)."""
        return None if self.joined else "joining the notify consumer group"

    async def close(self) -> None:
        """Leave the group (its partitions go to the other nodes) and close the HTTP session."""
        await self.poster.close()
        await self.consumer.close()

    async def run(self) -> None:
        """Consume, deliver, commit, forever (EngineError on a broker error ends it: the node restarts)."""
        self.poster.start()
        await self.consumer.subscribe(OUTBOX_TOPIC)
        self.joined = True
        while True:
            msgs = await self.consumer.consume(self.batch, 0.5)
            if not msgs:
                self.metrics.lag_seconds.set(0)
                await self._update_lag()
                continue
            await self._deliver(msgs)
            offsets: dict[int, int] = {}
            for m in msgs:
                offsets[m.partition()] = m.offset() + 1
            try:
                await self.consumer.commit_many(OUTBOX_TOPIC, offsets)
                self._next.update(offsets)
            except EngineError as exc:  # partitions moved during the POST: the new owner redelivers
                self.metrics.commit_failures.inc()
                logger.warning("notify commit refused (%s): its records will be delivered again", type(exc).__name__)
            await self._update_lag(force=True)

    async def _deliver(self, msgs: list) -> None:
        """POST the batch until a 2xx, with bounded jittered backoff; never skips."""
        items = []
        for m in msgs:
            try:
                items.append(notification(m))
            except outbox_codec.OutboxDecodeError:  # not a record QIM wrote: nothing to notify, counted
                self.metrics.dropped.inc()
                logger.error(
                    "notify: an undecodable Outbox record at partition %d offset %d skipped", m.partition(), m.offset()
                )
        if not items:
            return
        body = json.dumps({"notifications": items}, separators=(",", ":")).encode()
        oldest = min(i["created_at_ms"] for i in items)
        delay = BACKOFF_MIN_S
        while True:
            outcome = await self.poster.post(body)
            self.metrics.attempts.labels(outcome=outcome).inc()
            if outcome == "ok":
                self.failing = ""
                self.metrics.delivered.inc(len(items))
                return
            self.failing = outcome
            self.metrics.lag_seconds.set(max(0.0, time.time() - oldest / 1000))
            await self._update_lag()
            logger.info("notify receiver: %s; retrying %d notifications in %.1fs", outcome, len(items), delay)
            await asyncio.sleep(random.uniform(delay / 2, delay))
            delay = min(BACKOFF_MAX_S, delay * 2)


    async def _update_lag(self, force: bool = False) -> None:
        """qim_moderation_notify_lag_records over this node's partitions (high watermark -
        delivered position; the committed offset for a partition not delivered here yet)."""
        if not force and time.monotonic() - self._lag_at < LAG_PERIOD_S:
            return
        self._lag_at = time.monotonic()
        try:
            parts = await self.consumer.assigned()
            if not parts:
                self.metrics.lag_records.set(0)
                return
            high = await self.consumer.high_watermarks(OUTBOX_TOPIC, parts)
            missing = [p for p in parts if p not in self._next]
            done = dict(self._next)
            if missing:
                done.update(await self.consumer.committed(OUTBOX_TOPIC, missing))
            self.metrics.lag_records.set(sum(max(0, high[p] - max(done.get(p, 0), 0)) for p in parts))
        except EngineError as exc:  # a broker hiccup: the next pass reads it again
            logger.info("notify lag not read (%s)", type(exc).__name__)
