"""MailboxMaterializer (docs/design.md §5.4, seed 001 §2.5, seed 004 §5).

Statically assigns its dispatch partitions and seeks each to the watermark's start
offset (never trusts committed group offsets); reports ready only after catching up to
the high watermark seen at start. One FIFO worker per shard (capacity 128, strictly
serial within a partition; its state: shardstate.py) under the node's turn permits (8
on the Redis store, 64 on CQL: decision 0165), of which shards holding no direct record
get 4 (turngate.py, decision 0148); a full FIFO pauses only its partition (with
overtakes, decision 0142, it reads further ahead: overtake.py). The worker materializes
the records its FIFO holds together, up to a batch
(decisions/0067: a backlog costs one round trip and one watermark write per batch). A
Redis failure is retried with backoff by repeating the call: the failed call may have
applied (a reply lost to a client timeout), and the repeat either completes it or
recognises, by this materializer's writer token stored beside W, that it already did
(docs/decisions/0024-mailbox-finish-recognises-its-own-write.md). A digest conflict,
an undecodable record or a watermark moved by anyone else stops that shard
(MailboxDirty, /healthz 503) until a restart replays it. Push is best effort and never
awaited on the shard path.

Shards come and go (docs/decisions/0040-scale-leases-and-fencing.md): with a
ShardRegistry the node's ShardKeeper calls `add_shard(shard, owner_epoch)` for every
grant (fence, then the watermark, then the partition is added to the assignment at
min(W)+1: a takeover starts exactly there, never at a consumer-group offset) and
`remove_shard` when the lease is given up or lost (the worker stops at once, the
partition leaves the assignment). A write refused because a newer owner fenced the
shard (NotOwner) stops that shard the same way, is counted and reported to `on_lost`.
Without a registry (tests, tools) `start()` takes the shards given at construction.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import secrets
import time
from typing import Callable, Optional

from qim._core import watermark
from qim._core.types import MailboxEvent
from qim.consts import (
    CONVERSATION_KIND_DIRECT,
    CONVERSATION_KIND_GROUP,
    CONVERSATION_KIND_ROOM,
    DISPATCH_TOPIC,
    KAFKA_CONSUME_WAIT_S,
    MAILBOX_BULK_TURNS,
    MAILBOX_GLOBAL_PERMIT,
)
from qim.errors import EngineError
from qim.faults import FaultPoints
from qim.infra.kafka.consumer import AsyncConsumer
from qim.obs import otel
from qim.obs.logcontext import bind, tracer
from qim.services.mailbox import overtake
from qim.services.mailbox.dpgc import gc_loop
from qim.services.mailbox.inline import Inline
from qim.services.mailbox.metrics import MailboxMetrics
from qim.services.mailbox.record import Materialized, batch_of, materialize
from qim.services.mailbox.shardstate import ShardState
from qim.services.mailbox.shardstate import lowest_w as _w
from qim.services.mailbox.turngate import TurnGate
from qim.stores.errors import NotOwner
from qim.stores.mailboxes import MailboxStore

logger = logging.getLogger(__name__)

PAUSED_POLL_S = 0.1
# a conversation id's kind byte -> the record-age label
KINDS = {CONVERSATION_KIND_DIRECT: "direct", CONVERSATION_KIND_GROUP: "group", CONVERSATION_KIND_ROOM: "room"}
# (tenant, mailbox_seq, recipients, their MailboxEvent, the message's trace id: 16 bytes
# or b"", what the push carries whole per user: inline.py, decisions/0156) of one record;
# must not await
PushHook = Callable[[int, int, tuple, MailboxEvent, bytes, Inline], None]
LostHook = Callable[[int, str], None]  # (shard, reason): a shard this node stopped serving by itself


class MailboxMaterializer:
    """`start()` positions the shards; `run()` consumes until cancelled. Counts into
    `metrics` (a private MailboxMetrics when None). `consumer`: the dispatch consumer
    (default: an AsyncConsumer on `bootstrap`). `writer` is this instance's token, stored
    beside every watermark it writes: unique per process start, so a restarted or second
    owner never passes for this one. `shards`: the shards `start()` takes without a
    registry (empty with one: `add_shard`). `overtake`: direct records queued behind a
    backlog finish first, lane by lane (overtake.py, decision 0142; only a store whose
    watermark holds 64 independent lanes). `bulk_turns`: how many turns of shards holding
    no direct record run at once (turngate.py, decision 0148); `turns`: how many turns run
    at once in all (8 on the Redis store, whose calls only queue past a few: decision 0165)."""

    def __init__(self, bootstrap: str, store: MailboxStore, shards: list[int], push: PushHook,
                 faults: FaultPoints, dp_gc_safety_ms: int = 0, metrics: Optional[MailboxMetrics] = None,
                 consumer: Optional[AsyncConsumer] = None, on_lost: Optional[LostHook] = None,
                 overtake: bool = False, bulk_turns: int = MAILBOX_BULK_TURNS,
                 turns: int = MAILBOX_GLOBAL_PERMIT) -> None:
        self._m = metrics if metrics is not None else MailboxMetrics()
        self._consumer = consumer if consumer is not None else AsyncConsumer(bootstrap, "qim-mailbox")
        self._store = store
        self._owned = shards
        self._push = push
        self._faults = faults
        self._gc_safety_ms = dp_gc_safety_ms
        # a shard holding a direct record takes its turn before the group's bulk (decision 0148)
        kinds = {True: self._m.turns.labels(kind="direct"), False: self._m.turns.labels(kind="bulk")}
        self._ages = collections.defaultdict(lambda: self._m.record_age.labels(kind="other"),
                                             {k: self._m.record_age.labels(kind=n) for k, n in KINDS.items()})
        self._gate = TurnGate(turns, min(bulk_turns, turns), lambda urgent: kinds[urgent].inc())
        self.shards: dict[int, ShardState] = {}
        self.running = False
        self.writer = f"{os.getpid()}-{secrets.token_hex(8)}".encode()
        self._on_lost = on_lost
        self._overtake = overtake

    @property
    def dirty_reasons(self) -> list[str]:
        """One line per shard stopped by MailboxDirty (readiness reasons)."""
        return [f"shard {s.shard}: {s.dirty}" for s in self.shards.values() if s.dirty]

    def caught_up(self) -> bool:
        """Whether every clean shard's W reached the high watermark seen at start."""
        return all(_w(s) >= s.catch_up_to - 1 for s in self.shards.values() if not s.dirty)

    async def _load(self, shard: int, owner_epoch: Optional[int]) -> ShardState:
        """The shard's state from its watermark (fenced at `owner_epoch` first when given);
        fails closed on a corrupt blob before anything is served."""
        if owner_epoch is None:
            blob, epoch = await self._store.load_watermark(shard)
        else:
            blob, epoch = await self._store.load_watermark(shard, fence=owner_epoch)
        state = ShardState(shard, epoch, blob, self.writer, owner_epoch or 0)
        watermark.decode(state.blob)
        return state

    async def start(self) -> None:
        """Without a registry: load the watermark of every shard given at construction
        (fail closed on a corrupt one) and assign the partitions from it."""
        starts = {}
        for shard in self._owned:
            state = self.shards[shard] = await self._load(shard, None)
            starts[shard] = state.next_offset
        await self._consumer.assign(DISPATCH_TOPIC, starts)
        for shard, hw in (await self._consumer.high_watermarks(DISPATCH_TOPIC, self._owned)).items():
            self.shards[shard].catch_up_to = hw
        logger.info("mailbox owns %d shards", len(self._owned))

    async def add_shard(self, shard: int, owner_epoch: int) -> None:
        """Serve `shard` as owner `owner_epoch`: fence, load W, assign its partition at
        min(W)+1 and start its worker. NotOwner when a newer owner fenced it already;
        StoreUnavailable / EngineError when Redis or the broker fails (nothing served)."""
        state = await self._load(shard, owner_epoch)
        state.catch_up_to = (await self._consumer.high_watermarks(DISPATCH_TOPIC, [shard]))[shard]
        self.shards[shard] = state
        try:
            await self._consumer.add_partitions(DISPATCH_TOPIC, {shard: state.next_offset})
        except BaseException:
            self.shards.pop(shard, None)
            raise
        if self.running and state.worker is None:  # else run() starts it
            state.worker = asyncio.get_running_loop().create_task(self._worker(state), name=f"mailbox:shard{shard}")
        logger.info("mailbox shard %d served from offset %d (owner_epoch %d, shard_epoch %d)", shard,
                    state.next_offset, owner_epoch, state.epoch)

    async def remove_shard(self, shard: int, reason: str) -> None:
        """Stop serving `shard` at once (its worker is cancelled: every step of a record is
        safe to repeat by the next owner) and drop its partition. Never raises."""
        state = self.shards.pop(shard, None)
        if state is None:
            return
        await self._stop_worker(state)
        await self._unassign(shard)
        logger.info("mailbox shard %d no longer served: %s", shard, reason)

    async def _unassign(self, shard: int) -> None:
        """Drop `shard`'s partition; a failure is logged (its records are ignored anyway:
        the shard left `shards`)."""
        try:
            await self._consumer.remove_partitions(DISPATCH_TOPIC, [shard])
        except EngineError as exc:
            logger.warning("mailbox shard %d: unassign failed: %s", shard, exc)

    @staticmethod
    async def _stop_worker(state: ShardState) -> None:
        state.queue.clear()
        task, state.worker = state.worker, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def run(self) -> None:
        """Consume and feed the shard FIFOs until cancelled (workers and GC as tasks)."""
        loop = asyncio.get_running_loop()
        for s in self.shards.values():
            s.worker = loop.create_task(self._worker(s), name=f"mailbox:shard{s.shard}")
        tasks = [loop.create_task(self._gc_loop())] if self._gc_safety_ms else []
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
                now_ms = time.time() * 1000
                for m in msgs:
                    state = self.shards.get(m.partition())
                    if state is None or m.offset() < state.next_offset:
                        continue  # a shard given up, or a record queued before (never twice)
                    state.next_offset = m.offset() + 1
                    state.queue.append(m)
                    if overtake.queued(state, m):  # LogAppendTime: one clock on one machine
                        self._m.direct_read_lag.observe(max(0.0, now_ms - m.timestamp()[1]) / 1000)
                    state.wakeup.set()
                    if not state.paused and overtake.full(state, self._overtake):  # reads ahead to overtake (0142)
                        state.paused = True
                        full.append(state.shard)
                if full:
                    self._m.pauses.inc(len(full))
                    await self._consumer.pause(DISPATCH_TOPIC, full)
                self._m.queued.set(sum(len(s.queue) for s in self.shards.values()))
                drained = [s for s in self.shards.values()
                           if s.paused and not s.dirty and overtake.drained(s, self._overtake)]
                if drained:
                    for s in drained:
                        s.paused = False
                    await self._consumer.resume(DISPATCH_TOPIC, [s.shard for s in drained])
        finally:
            self.running = False
            workers = [s.worker for s in self.shards.values() if s.worker is not None]
            for t in tasks + workers:
                t.cancel()
            await asyncio.gather(*tasks, *workers, return_exceptions=True)

    async def _worker(self, state: ShardState) -> None:
        while True:
            if not state.queue:
                state.wakeup.clear()
                await state.wakeup.wait()
                continue
            batch = batch_of(state.queue, self._faults.active)  # decisions/0067
            span = f"offset {batch[0].offset()}" if len(batch) == 1 else \
                f"offsets {batch[0].offset()}..{batch[-1].offset()}"
            async with self._gate.turn(lambda: bool(state.directs)):
                try:  # a direct record behind the batch first, in its lanes (decision 0142); never with a fault armed
                    if self._overtake and not self._faults.active:
                        self._m.overtakes.inc(await overtake.turn(self._store, state, self._pushed))
                    # W covers the records that overtook up to the next queued one (decision 0142)
                    through = state.queue[len(batch)].offset() - 1 if len(state.queue) > len(batch) else \
                        state.next_offset - 1
                    with otel.batch_spans(state.shard, batch):  # the batch's spans, when tracing is on (0140)
                        await self._apply(state, [(m.offset(), m.value()) for m in batch], through)
                except NotOwner as exc:  # a newer owner fenced the shard: this node must stop serving it
                    self._m.fenced.inc()
                    logger.error("mailbox shard %d: write at %s refused (%s); stopping the shard",
                                 state.shard, span, exc.message)
                    state.queue.clear()
                    if self.shards.get(state.shard) is state:
                        del self.shards[state.shard]
                        if self._on_lost is not None:
                            self._on_lost(state.shard, "refused")
                        await self._unassign(state.shard)
                    return
                except Exception as exc:  # MailboxDirty, or any bug: stop the shard visibly, never silently
                    self._m.dirty.inc()
                    state.dirty = f"{span}: {exc.__class__.__name__}: {exc}"
                    state.queue.clear()
                    logger.error("mailbox shard %d stopped: %s", state.shard, state.dirty)
                    await self._consumer.pause(DISPATCH_TOPIC, [state.shard])
                    return
            for _ in batch:
                overtake.taken(state, state.queue.popleft())

    async def _apply(self, state: ShardState, records: list[tuple[int, bytes]], through: int) -> None:
        """Materialize `records` (retried after an engine failure with the same records:
        safe, record.py; W advanced `through` that offset), then count and push each one
        that is new."""
        delay = 0.2
        started = time.perf_counter()
        while True:
            try:
                done = await materialize(self._store, state, records, self._faults, through, state.prepared)
                break
            except EngineError as exc:  # applied or not: repeating the call is safe (module doc)
                self._m.retries.inc()
                logger.warning("shard %d offsets %d..%d: %s; retrying", state.shard, records[0][0], records[-1][0],
                               exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        self._m.stage.labels(stage="materialize").observe(time.perf_counter() - started)
        self._m.batch.observe(len(records))
        state.stored_blob = done[-1].new_blob
        for one in done:
            self._pushed(one)

    def _pushed(self, one: Materialized) -> None:
        """Count one materialized record and push it unless it is a DUPLICATE."""
        self._m.records.labels(status=one.status).inc()
        with bind(trace=one.trace_id):  # the log lines' trace=; pushes and projections get it passed
            tracer.debug("materialized mailbox_seq %d for %d recipient(s): %s", one.mailbox_seq,
                         len(one.recipients), one.status)
            if one.status != "DUPLICATE":  # RECOVERED: the push of the lost attempt never happened
                self._m.entries.inc(len(one.recipients))
                age = time.time() - one.event.created_at_ms / 1000
                self._ages[one.event.conversation_id[0]].observe(max(age, 0.0))
                self._push(one.tenant, one.mailbox_seq, one.recipients, one.event, one.trace_id, one.inline)

    async def _gc_loop(self) -> None:
        """DispatchProgress GC of the owned shards (dpgc.py), until cancelled."""
        await gc_loop(self._store, self.shards, self._gc_safety_ms, self._m)

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
