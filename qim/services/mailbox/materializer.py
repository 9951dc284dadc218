"""MailboxMaterializer (docs/design.md §5.4, seed 001 §2.5, seed 004 §5).

Statically assigns its dispatch partitions and seeks each to the watermark's start
offset (never trusts committed group offsets); reports ready only after catching up to
the high watermark seen at start. One FIFO worker per shard (capacity 128, strictly
serial within a partition) under a global permit (64); a full FIFO pauses only its
partition. A Redis failure is retried with backoff by repeating the record: the
failed call may have applied (a reply lost to a client timeout), and the repeat either
completes it or recognises, by this materializer's writer token stored beside W, that
it already did (docs/decisions/0024-mailbox-finish-recognises-its-own-write.md). A
digest conflict, an undecodable record or a watermark moved by anyone else stops that
shard (MailboxDirty, /healthz 503) until a restart replays it. Push is best effort and
never awaited on the shard path.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import secrets
import time
from typing import Callable, Deque, Optional

from qim._core import watermark
from qim.consts import DISPATCH_TOPIC, KAFKA_CONSUME_WAIT_S, MAILBOX_GLOBAL_PERMIT, MAILBOX_SHARD_FIFO
from qim.errors import EngineError
from qim.faults import FaultPoints
from qim.infra.kafka.bridge import AsyncConsumer
from qim.obs.logcontext import bind, tracer
from qim.services.mailbox.metrics import MailboxMetrics
from qim.services.mailbox.record import ShardCursor, materialize
from qim.stores.mailboxes import MailboxStore

logger = logging.getLogger(__name__)

PAUSED_POLL_S = 0.1
PushHook = Callable[[int, int, list], None]  # (tenant, mailbox_seq, [(user, events)]); must not await


class ShardState(ShardCursor):
    """A shard worker's state: its cursor, FIFO of records, pause flag, dirty reason and catch-up target."""
    def __init__(self, shard: int, epoch: int, blob, writer: bytes = b"") -> None:
        super().__init__(shard, epoch, blob, writer)
        self.queue: Deque = collections.deque()
        self.wakeup = asyncio.Event()
        self.paused = False
        self.dirty = ""
        self.catch_up_to = 0  # high watermark at start: ready once W reaches it - 1


class MailboxMaterializer:
    """`start()` positions the shards; `run()` consumes until cancelled. Counts into
    `metrics` (a private MailboxMetrics when None). `consumer`: the dispatch consumer
    (default: an AsyncConsumer on `bootstrap`). `writer` is this instance's token, stored
    beside every watermark it writes: unique per process start, so a restarted or second
    owner never passes for this one."""

    def __init__(self, bootstrap: str, store: MailboxStore, shards: list[int], push: PushHook,
                 faults: FaultPoints, dp_gc_safety_ms: int = 0, metrics: Optional[MailboxMetrics] = None,
                 consumer: Optional[AsyncConsumer] = None) -> None:
        self._m = metrics if metrics is not None else MailboxMetrics()
        self._consumer = consumer if consumer is not None else AsyncConsumer(bootstrap, "qim-mailbox")
        self._store = store
        self._owned = shards
        self._push = push
        self._faults = faults
        self._gc_safety_ms = dp_gc_safety_ms
        self._permit = asyncio.Semaphore(MAILBOX_GLOBAL_PERMIT)
        self.shards: dict[int, ShardState] = {}
        self.running = False
        self.writer = f"{os.getpid()}-{secrets.token_hex(8)}".encode()

    @property
    def dirty_reasons(self) -> list[str]:
        """One line per shard stopped by MailboxDirty (readiness reasons)."""
        return [f"shard {s.shard}: {s.dirty}" for s in self.shards.values() if s.dirty]

    def caught_up(self) -> bool:
        """Whether every clean shard's W reached the high watermark seen at start."""
        return all(_w(s) >= s.catch_up_to - 1 for s in self.shards.values() if not s.dirty)

    async def start(self) -> None:
        """Load every owned shard's watermark (fail closed on a corrupt one) and assign the partitions from it."""
        starts = {}
        for shard in self._owned:
            blob, epoch = await self._store.load_watermark(shard)
            state = ShardState(shard, epoch, blob, self.writer)
            watermark.decode(state.blob)  # fail closed on a corrupt blob before serving
            self.shards[shard] = state
            starts[shard] = watermark.start_offset(state.blob)
        await self._consumer.assign(DISPATCH_TOPIC, starts)
        for shard, hw in (await self._consumer.high_watermarks(DISPATCH_TOPIC, self._owned)).items():
            self.shards[shard].catch_up_to = hw
        logger.info("mailbox owns %d shards", len(self._owned))

    async def run(self) -> None:
        """Consume and feed the shard FIFOs until cancelled (workers and GC as tasks)."""
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(self._worker(s)) for s in self.shards.values()]
        if self._gc_safety_ms:
            tasks.append(loop.create_task(self._gc_loop()))
        self.running = True
        try:
            while True:
                # a paused shard is resumed after a consume returns: poll often while one is
                # paused, else wait long (it returns on the first record; idle wake-ups only)
                wait = PAUSED_POLL_S if any(s.paused for s in self.shards.values()) else KAFKA_CONSUME_WAIT_S
                try:
                    msgs = await self._consumer.consume(256, wait)
                except EngineError as exc:
                    logger.warning("dispatch read failed: %s", exc)
                    await asyncio.sleep(0.5)
                    continue
                full = []
                for m in msgs:
                    state = self.shards[m.partition()]
                    state.queue.append(m)
                    state.wakeup.set()
                    if len(state.queue) >= MAILBOX_SHARD_FIFO and not state.paused:
                        state.paused = True
                        full.append(state.shard)
                if full:
                    self._m.pauses.inc(len(full))
                    await self._consumer.pause(DISPATCH_TOPIC, full)
                self._m.queued.set(sum(len(s.queue) for s in self.shards.values()))
                drained = [s for s in self.shards.values()
                           if s.paused and not s.dirty and len(s.queue) < MAILBOX_SHARD_FIFO // 2]
                if drained:
                    for s in drained:
                        s.paused = False
                    await self._consumer.resume(DISPATCH_TOPIC, [s.shard for s in drained])
        finally:
            self.running = False
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _worker(self, state: ShardState) -> None:
        while True:
            if not state.queue:
                state.wakeup.clear()
                await state.wakeup.wait()
                continue
            msg = state.queue[0]
            async with self._permit:
                try:
                    await self._one(state, msg.offset(), msg.value())
                except Exception as exc:  # MailboxDirty, or any bug: stop the shard visibly, never silently
                    self._m.dirty.inc()
                    state.dirty = f"offset {msg.offset()}: {exc.__class__.__name__}: {exc}"
                    state.queue.clear()
                    logger.error("mailbox shard %d stopped: %s", state.shard, state.dirty)
                    await self._consumer.pause(DISPATCH_TOPIC, [state.shard])
                    return
            state.queue.popleft()

    async def _one(self, state: ShardState, offset: int, value: bytes) -> None:
        delay = 0.2
        started = time.perf_counter()
        while True:
            try:
                done = await materialize(self._store, state, offset, value, self._faults)
                break
            except EngineError as exc:  # applied or not: repeating the record is safe (module doc)
                self._m.retries.inc()
                logger.warning("shard %d offset %d: %s; retrying", state.shard, offset, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        self._m.stage.labels(stage="materialize").observe(time.perf_counter() - started)
        state.stored_blob = done.new_blob
        self._m.records.labels(status=done.status).inc()
        with bind(trace=done.trace_id):  # the push hook reads it (pushes and projections carry it)
            tracer.debug("materialized shard %d offset %d for %d recipient(s): %s", state.shard, offset,
                         len(done.per_user), done.status)
            if done.status != "DUPLICATE":  # RECOVERED: the push of the lost attempt never happened
                self._push(done.tenant, done.mailbox_seq, done.per_user)

    async def _gc_loop(self) -> None:
        """DispatchProgress GC: delete DP whose highest observed offset is at or below the
        W every lane had `safety` ms ago (so W passed it and the replay window elapsed)."""
        history: dict[int, Deque] = {s: collections.deque() for s in self.shards}
        while True:
            now = time.monotonic()
            for shard, state in self.shards.items():
                history[shard].append((now, _w(state)))
                old = None
                while history[shard] and now - history[shard][0][0] >= self._gc_safety_ms / 1000:
                    old = history[shard].popleft()[1]
                if old is not None and old >= 0:
                    history[shard].appendleft((now - self._gc_safety_ms / 1000, old))
                    try:
                        self._m.dp_gc.inc(await self._store.gc_dispatch_progress(shard, old))
                    except Exception as exc:
                        logger.warning("DispatchProgress GC of shard %d failed: %s", shard, exc)
            await asyncio.sleep(min(1.0, self._gc_safety_ms / 1000))

    async def lag_loop(self, period_s: float = 5.0) -> None:
        """Export the dispatch lag and the watermark sum of the owned shards (high
        watermarks read from the broker off the event loop)."""
        while True:
            try:
                hws = await self._consumer.high_watermarks(DISPATCH_TOPIC, self._owned)
                self._m.lag.set(sum(max(0, hw - (_w(self.shards[p]) + 1)) for p, hw in hws.items() if p in self.shards))
                self._m.watermark.set(sum(_w(s) + 1 for s in self.shards.values()))
            except EngineError as exc:
                logger.debug("dispatch lag unavailable: %s", exc)
            await asyncio.sleep(period_s)

    async def close(self) -> None:
        """Close the dispatch consumer."""
        await self._consumer.close()


def _w(state: ShardCursor) -> int:
    """Lowest materialized W over the lanes, -1 when nothing was materialized."""
    return watermark.start_offset(state.blob) - 1
