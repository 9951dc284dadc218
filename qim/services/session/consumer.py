"""SessionProjection's durable dispatch consumer (docs/design.md §6; seed 000: "qsession 独立
静态消费 dispatch 并把 Redis checkpoint 绑定 cluster_id + topic_id + partition_count").

Reads every partition of qim.dispatch by static assignment from its OWN checkpoint in
Redis (never a consumer-group offset), registers the recipients this node owns (user
mod node count) with the shared registration function, and only after every registration
of the batch succeeded advances the checkpoint by compare-and-set: both in one script,
one Redis round trip per poll (session_project.lua). A crash replays the
batch; registration is idempotent. Ready once caught up to the high watermarks seen at
start (before that the node refuses list pages: they could miss conversations).

Fails closed — stays up, not ready, the reason in /healthz and in UNAVAILABLE replies —
when the checkpoint is bound to another cluster id, topic id or partition count; when
the topic has no topic id or not QIM_MAILBOX_SHARD_COUNT partitions; when a checkpoint
offset is below the retained log start (records lost to retention) or past the log end
(topic re-created); when the checkpoint moved under us (two nodes with one index); on
an undecodable dispatch record. Redis and broker outages are retried with backoff.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Optional

from qim.consts import DISPATCH_TOPIC, KAFKA_BATCH_FETCH, KAFKA_CONSUME_WAIT_S, SESSION_CONSUME_BATCH
from qim.errors import EngineError
from qim.infra.kafka.bridge import AsyncConsumer, topic_identity
from qim.obs.logcontext import bind, tracer
from qim.services.session.metrics import SessionMetrics
from qim.services.session.register import Registration, from_message, merge
from qim.stores.errors import StorageError
from qim.stores.sessions import SessionStore
from qim.wire import dispatch as dispatch_record

logger = logging.getLogger(__name__)

IDENTITY_WAIT_S = 60.0


class DurableProjector:
    """`start()` binds and positions; `run()` consumes until cancelled or failed closed.
    `on_registered(regs)` is called after each batch's store writes (cache marks)."""

    def __init__(self, bootstrap: str, sessions: SessionStore, shard_count: int, node_index: int, node_count: int,
                 on_registered: Callable[[list[Registration]], None],
                 metrics: Optional[SessionMetrics] = None) -> None:
        self._m = metrics if metrics is not None else SessionMetrics()
        self._bootstrap = bootstrap
        # no user waits on this path (the mailbox's low-latency feed comes first): large
        # fetches, one script call per batch of many records (docs/decisions/0053)
        self._consumer = AsyncConsumer(bootstrap, f"qim-session-{node_index}", KAFKA_BATCH_FETCH)
        self._sessions = sessions
        self._shard_count = shard_count
        self._index, self._count = node_index, node_count
        self._key = f"{node_index} of {node_count}"
        self._on_registered = on_registered
        self._binding = ""
        self.next: dict[int, int] = {}
        self.catch_up_to: dict[int, int] = {}
        self.stopped = ""
        self.running = False

    def owns(self, user: int) -> bool:
        """Whether this node projects user `user` (user mod node count = node index)."""
        return user % self._count == self._index

    def not_ready(self) -> Optional[str]:
        """Why list pages must not be served now, or None."""
        if self.stopped:
            return f"durable projection failed closed: {self.stopped}"
        if not self.running:
            return "durable projection not running"
        if any(self.next[p] < hw for p, hw in self.catch_up_to.items()):
            return "durable projection catching up with the dispatch log"
        return None

    def _fail_closed(self, reason: str) -> None:
        self.stopped = reason
        logger.error("session durable projection stopped: %s", reason)

    async def start(self) -> None:
        """Bind the checkpoint and assign. Raises EngineError when the broker stays
        unreachable; every other problem fails closed (see the module docstring)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + IDENTITY_WAIT_S
        while True:
            try:
                cluster, topic_id, parts = await topic_identity(self._bootstrap, DISPATCH_TOPIC)
                break
            except EngineError as exc:
                if loop.time() > deadline or "topic id" in str(exc):
                    raise
                logger.info("waiting for dispatch topic metadata: %s", exc)
                await asyncio.sleep(1.0)
        if parts != self._shard_count:
            return self._fail_closed(f"{DISPATCH_TOPIC} has {parts} partitions, QIM_MAILBOX_SHARD_COUNT={self._shard_count}")
        self._binding = f"{cluster}|{topic_id}|{parts}"
        ckpt = await self._sessions.checkpoint_bind(self._index, self._count, self._binding, parts)
        if ckpt.status == "MISMATCH":
            return self._fail_closed(f"checkpoint bound to {ckpt.binding}, the broker has {self._binding}")
        self.next = dict(enumerate(ckpt.offsets))
        for p, (low, high) in (await self._consumer.watermark_ranges(DISPATCH_TOPIC, list(range(parts)))).items():
            if self.next[p] < low:
                return self._fail_closed(f"partition {p}: checkpoint {self.next[p]} below the retained log start {low}")
            if self.next[p] > high:
                return self._fail_closed(f"partition {p}: checkpoint {self.next[p]} past the log end {high}")
            self.catch_up_to[p] = high
        await self._consumer.assign(DISPATCH_TOPIC, dict(self.next))
        logger.info("session durable projection %s at %s (%s)", self._key, sum(self.next.values()),
                    "new checkpoint" if ckpt.status == "NEW" else "resumed")

    async def run(self) -> None:
        """Consume and project batch after batch until cancelled or failed closed (see the module docstring)."""
        if self.stopped:
            return
        self.running = True
        try:
            while not self.stopped:
                try:
                    msgs = await self._consumer.consume(SESSION_CONSUME_BATCH, KAFKA_CONSUME_WAIT_S)
                except EngineError as exc:
                    logger.warning("dispatch read failed: %s", exc)
                    await asyncio.sleep(0.5)
                    continue
                if msgs:
                    await self._batch(msgs)
        finally:
            self.running = False

    async def _batch(self, msgs: list) -> None:
        regs: list[Registration] = []
        advance: dict[int, int] = {}
        for m in msgs:
            part, off = m.partition(), m.offset()
            if off < self.next[part]:
                continue
            try:
                d = dispatch_record.decode(m.value())
                c = d.coord
                if d.trace_id and tracer.isEnabledFor(logging.DEBUG):
                    with bind(trace=d.trace_id):
                        tracer.debug("durable projection of partition %d offset %d", part, off)
                regs += from_message(d.tenant, c.conversation_id, c.conversation_seq, c.created_at_ms, c.sender_id,
                                     d.recipients, self.owns)
            except (dispatch_record.DispatchDecodeError, ValueError) as exc:
                # never skip a record: a gap here is a conversation missing from a list
                return self._fail_closed(f"partition {part} offset {off}: {exc}")
            advance[part] = off + 1
        if not advance:
            return
        regs = merge(regs)
        moves = {part: (self.next[part], new) for part, new in advance.items()}
        delay = 0.2
        while True:
            try:
                # registrations then the checkpoint's compare-and-set, one round trip per
                # poll (no per-record round trip); a retry after a lost reply finds its own values and passes
                await self._sessions.project(self._index, self._count, self._binding, moves, regs)
                break
            except EngineError as exc:  # StoreUnavailable: nothing moved, retry the batch
                self._m.durable_retries.inc()
                logger.warning("durable projection batch failed (%s); retrying", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
            except StorageError as exc:  # another owner of the checkpoint, or it was rebound
                return self._fail_closed(f"checkpoint: {exc.reason or 'refused'} {exc.message}")
        self.next.update(advance)
        self._m.dispatch_records.inc(len(msgs))
        self._m.registrations.labels(path="durable").inc(len(regs))
        self._on_registered(regs)

    async def lag_loop(self, period_s: float = 5.0) -> None:
        """Export the durable projection's lag over every dispatch partition."""
        while True:
            try:
                if self.next:
                    hws = await self._consumer.high_watermarks(DISPATCH_TOPIC, list(self.next))
                    self._m.lag.set(sum(max(0, hw - self.next[p]) for p, hw in hws.items()))
            except EngineError as exc:
                logger.debug("dispatch lag unavailable: %s", exc)
            await asyncio.sleep(period_s)

    async def close(self) -> None:
        """Close the dispatch consumer."""
        await self._consumer.close()
