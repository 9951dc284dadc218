"""FanoutCoordinator loop (docs/design.md §5.3): Outbox batch → dispatches → wait → commit.

The Outbox partitions this coordinator owns are read by static assignment from their
committed positions. Per batch: plan every record, produce every dispatch (partition =
shard, key = dispatch_id), await every delivery, then advance the position of every
partition the batch covered. Batches are produced while earlier ones still await their
deliveries (up to FANOUT_WINDOW_DISPATCHES records in flight) and are settled in order (window.py,
docs/decisions/0162). Any failure leaves the positions where they were; the batch is
re-read from them (the only seek besides the first positioning) and converges through
dispatch_id. No Kafka transactions. An unplannable record stops the coordinator (never
skipped).

Dispatches of direct conversations leave on a producer of their own (decision 0162): on
the shared one they waited behind the requests carrying a large group's 64 dispatch
records per message (each partition fsynced by the broker). A conversation's kind never
changes, so each conversation's records stay on one producer, in order per partition.

Partitions (docs/decisions/0041-scale-outbox-partitions.md, 0040-scale-leases-and-fencing.md):
the writer keeps every conversation in one Outbox partition (its commit bucket), so a
conversation's records are fanned out in order by whichever single coordinator owns
that partition; partitions are leased from the ShardRegistry by the node's ShardKeeper
(`add_partition` / `remove_partition`). Two coordinators briefly fanning out the same
records (a paused owner after a takeover) produce byte-identical dispatches that the
mailbox recognises by dispatch_id (a duplicate reuses the first mailbox_seq): positions
are hints, so the Kafka commit needs no fence. A partition given up is committed first,
so its next owner replays as little as possible.

The positions are committed synchronously by their own task (`_commit_loop`), never
before every dispatch below them is delivered, at once after an idle spell and then at
most every FANOUT_COMMIT_INTERVAL_S (docs/decisions/0026): the batch loop no longer waits a broker
write (an fsynced __consumer_offsets append) per batch, and a busy fanout writes one
commit per interval instead of one per batch. A crash replays at most one interval
more, which converges through dispatch_id like any replay (docs/decisions/0026).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Optional, Sequence

from qim.consts import (
    CONVERSATION_KIND_DIRECT,
    DISPATCH_TOPIC,
    FANOUT_COMMIT_INTERVAL_S,
    FANOUT_WINDOW_DISPATCHES,
    KAFKA_CONSUME_WAIT_S,
    OUTBOX_TOPIC,
)
from qim.errors import EngineError
from qim.faults import FaultPoints
from qim.infra.kafka.bridge import AsyncProducer
from qim.infra.kafka.consumer import AsyncConsumer
from qim.obs import otel
from qim.obs.logcontext import bind, tracer
from qim.services.fanout.metrics import FanoutMetrics
from qim.services.fanout.plan import MemberSnapshotCache, PlanError, parse_outbox, plan, snapshot_key
from qim.services.fanout.window import DeliveryWindow, Pending
from qim.stores.groups import GroupStore

logger = logging.getLogger(__name__)

GROUP_ID = "qim-fanout"
DIRECT_KIND = bytes([CONVERSATION_KIND_DIRECT])  # a conversation id's first byte (docs/design.md §3)


class FanoutCoordinator:
    """`run()` loops until cancelled; `stopped_reason` is set when it stops on a bad record.
    Counts into `metrics` (a private FanoutMetrics when None). `partitions`: what `run()`
    takes without a registry (tests); with one, `add_partition` / `remove_partition`.
    `window`: dispatch records in flight while it reads on (window.py, decision 0162)."""

    def __init__(self, bootstrap: str, shard_count: int, batch_size: int, faults: FaultPoints, groups: GroupStore,
                 metrics: Optional[FanoutMetrics] = None, partitions: Sequence[int] = (0,),
                 window: int = FANOUT_WINDOW_DISPATCHES) -> None:
        self._m = metrics if metrics is not None else FanoutMetrics()
        self._faults = faults
        self._snapshots = MemberSnapshotCache(groups, shard_count)
        self._bootstrap = bootstrap
        self._shard_count = shard_count
        self._batch_size = batch_size
        self._consumer = AsyncConsumer(bootstrap, GROUP_ID)
        self._producer = AsyncProducer(bootstrap)
        self._direct = AsyncProducer(bootstrap)  # direct conversations' dispatches (decision 0162)
        self._static = list(partitions)
        self._window_size = window
        # next Outbox offset to fan out per served partition: every dispatch below it is delivered
        self.positions: dict[int, int] = {}
        self._next: dict[int, int] = {}  # next Outbox offset to produce per partition (>= positions)
        self.committed: dict[int, int] = {}  # the position last committed to the broker
        # partition -> its tenure here (a new one per add_partition): a batch produced in an
        # earlier tenure never advances a later one's position (decision 0163)
        self._tenure: dict[int, int] = {}
        self._tenures = 0
        self._advanced = asyncio.Event()  # a position moved past its committed one
        self.stopped_reason = ""
        self.ready = False

    async def _committed(self, partition: int, timeout_s: float = 60.0) -> int:
        # A fresh broker answers NOT_COORDINATOR until its offsets topic is loaded:
        # retry (not ready meanwhile) instead of dying.
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                committed = (await self._consumer.committed(OUTBOX_TOPIC, [partition]))[partition]
                return committed if committed >= 0 else 0
            except EngineError as exc:
                if time.monotonic() > deadline:
                    raise
                logger.info("waiting for the outbox position: %s", exc)
                await asyncio.sleep(0.5)

    async def add_partition(self, partition: int, owner_epoch: int = 0) -> None:
        """Fan out Outbox `partition` from its committed position (EngineError when the
        broker cannot say where that is)."""
        position = await self._committed(partition)
        self.positions[partition] = self.committed[partition] = self._next[partition] = position
        self._tenures += 1
        self._tenure[partition] = self._tenures
        await self._consumer.add_partitions(OUTBOX_TOPIC, {partition: position})
        logger.info("fanout of outbox partition %d from offset %d (owner_epoch %d)", partition, position,
                    owner_epoch)

    async def remove_partition(self, partition: int, reason: str, graceful: bool = False) -> None:
        """Stop fanning out `partition` at once; with `graceful` (this node still holds
        it) commit its position first. Never raises."""
        if partition not in self.positions:
            return
        if graceful:
            await self._commit(partition)
        self.positions.pop(partition, None)
        self.committed.pop(partition, None)
        self._next.pop(partition, None)
        self._tenure.pop(partition, None)
        try:
            await self._consumer.remove_partitions(OUTBOX_TOPIC, [partition])
        except EngineError as exc:
            logger.warning("outbox partition %d: unassign failed: %s", partition, exc)
        logger.info("fanout of outbox partition %d stopped: %s", partition, reason)

    async def run(self) -> None:
        """Position, then fan out batch after batch; returns only when stopped on an
        unplannable record (`stopped_reason`), never skipping it."""
        for partition in self._static:
            await self.add_partition(partition)
        self.ready = True
        committer = asyncio.get_running_loop().create_task(self._commit_loop(), name="fanout:commit")
        try:
            await self._fan_out()
        finally:
            committer.cancel()
            await asyncio.gather(committer, return_exceptions=True)

    async def _fan_out(self) -> None:
        window = DeliveryWindow(self._window_size, self._settle)
        self._m.in_flight.set_function(lambda: window.in_flight)
        window.start()
        try:
            while True:
                if window.failure is not None:
                    await self._replay(window)
                    continue
                try:
                    records = await self._consumer.consume(self._batch_size, KAFKA_CONSUME_WAIT_S)
                except EngineError as exc:
                    logger.warning("outbox read failed: %s", exc)
                    await asyncio.sleep(0.5)
                    continue
                records = [r for r in records if r.offset() >= self._next.get(r.partition(), 1 << 62)]
                if not records:
                    continue
                try:
                    pending = await self._produce(records)
                except PlanError as exc:
                    await window.drain()  # the batches before it still advance their positions
                    self._m.unplannable.inc()
                    self.stopped_reason = str(exc)
                    self.ready = False
                    logger.error("fanout stopped at outbox offset %d: %s", records[0].offset(), exc)
                    return
                except EngineError as exc:  # a snapshot read or a produce refused: replay like a failed delivery
                    window.failure = window.failure or exc
                    continue
                await window.put(pending)  # waits while the window is full: reads no further
        finally:
            await window.stop()

    async def _replay(self, window: DeliveryWindow) -> None:
        """After a failed batch: let every batch in the window end (none advances a
        position), then re-read from the positions. A failure that is not an engine's
        (a bug) is raised: the node stops visibly rather than replaying forever."""
        await window.drain()
        exc = window.take_failure()
        if not isinstance(exc, EngineError):
            raise exc  # type: ignore[misc]
        self._m.replays.inc()
        logger.warning("fanout batch failed, replaying from %s: %s", self.positions, exc)
        await asyncio.sleep(0.5)
        self._next = dict(self.positions)
        await self._consumer.assign(OUTBOX_TOPIC, dict(self.positions))

    async def _process(self, records: list) -> None:
        """Produce `records`' dispatches and settle them (one batch, no window)."""
        await self._settle(await self._produce(records))

    async def _produce(self, records: list) -> Pending:
        """Plan every record and produce its dispatches; the futures are not awaited.
        PlanError on an unplannable record, EngineError (StoreUnavailable) when the
        member snapshots cannot be read or the producer refuses a record."""
        for rec in records:
            expected = self._next.get(rec.partition())
            if expected is not None and rec.offset() != expected:
                # A discontinuity (e.g. a retention gap) is logged; positions are hints.
                logger.info("outbox partition %d position moved from %s to %d", rec.partition(), expected,
                            rec.offset())
            self._next[rec.partition()] = rec.offset() + 1
        self._m.batch_records.observe(len(records))
        pending = Pending(records, started=time.perf_counter(),
                          tenures={p: self._tenure.get(p, 0) for p in {rec.partition() for rec in records}})
        outboxes = [parse_outbox(rec.value(), self._shard_count) for rec in records]
        snapshots = await self._snapshots.load({k for k in map(snapshot_key, outboxes) if k is not None})
        now_ms, produced_at = time.time() * 1000, time.perf_counter()
        delivered = functools.partial(_observe_since, self._m.direct_delivery, produced_at)
        try:
            for rec, outbox in zip(records, outboxes):
                key = snapshot_key(outbox)
                direct = outbox.record.conversation_id[:1] == DIRECT_KIND  # 16 bytes: parse_outbox checked
                if direct:  # the broker's LogAppendTime (QIM topics): the same clock on one machine
                    self._m.direct_read_lag.observe(max(0.0, now_ms - rec.timestamp()[1]) / 1000)
                span = otel.consumed(otel.SPAN_FANOUT, rec)  # None: tracing off or untraced (decision 0140)
                planned = plan(outbox, self._shard_count, snapshots.get(key) if key else None)
                for shard, dispatch in planned:
                    producer = self._direct if direct else self._producer  # a conversation's kind never changes
                    fut = producer.produce(DISPATCH_TOPIC, dispatch.encode(), key=dispatch.dispatch_id,
                                           partition=shard, headers=otel.headers_of(span))
                    if direct:
                        fut.add_done_callback(delivered)
                    pending.futures.append(fut)
                otel.end(span)
                if tracer.isEnabledFor(logging.DEBUG):
                    with bind(trace=outbox.trace_id):
                        tracer.debug("dispatch records produced for shards %s", sorted(shard for shard, _ in planned))
        except BaseException:
            # the records produced so far are delivered or fail on their own; nobody reads them
            asyncio.ensure_future(asyncio.gather(*pending.futures, return_exceptions=True))
            raise
        pending.produced = time.perf_counter()
        return pending

    async def _settle(self, pending: Pending) -> None:
        """Await a batch's deliveries, then advance its partitions' positions (never past
        an undelivered dispatch). EngineError when any delivery failed (nothing advances)."""
        results = await asyncio.gather(*pending.futures, return_exceptions=True)
        self._m.delivery_wait.observe(time.perf_counter() - pending.produced)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            raise EngineError(f"{len(failed)} of {len(results)} dispatch deliveries failed: {failed[0]}")
        self._m.dispatches.inc(len(results))
        self._m.stage.labels(stage="fanout").observe(time.perf_counter() - pending.started)
        self._faults.hit("after_dispatch")
        for rec in pending.records:
            # not given up while the batch was in flight, nor given up and taken again: a
            # stale batch's offsets may lie above the new tenure's undelivered records (0163)
            p = rec.partition()
            if p in self.positions and self._tenure.get(p, 0) == pending.tenures.get(p, 0):
                self.positions[p] = rec.offset() + 1
        self._m.position.set(sum(self.positions.values()))
        self._advanced.set()

    async def _commit_loop(self) -> None:
        """Commit the positions whenever they moved, at most every FANOUT_COMMIT_INTERVAL_S;
        a failed commit is retried (positions are hints: the next commit covers it)."""
        while True:
            await self._advanced.wait()
            self._advanced.clear()
            if await self.commit_position():
                await asyncio.sleep(FANOUT_COMMIT_INTERVAL_S)
            else:
                self._advanced.set()
                await asyncio.sleep(0.5)

    async def commit_position(self) -> bool:
        """Commit every position that moved, synchronously; False when the broker refused
        one (logged)."""
        ok = True
        for partition in list(self.positions):
            ok = await self._commit(partition) and ok
        return ok

    async def _commit(self, partition: int) -> bool:
        position = self.positions.get(partition, -1)
        if position <= self.committed.get(partition, -1):
            return True
        started = time.perf_counter()
        try:
            await self._consumer.commit(OUTBOX_TOPIC, partition, position)
        except EngineError as exc:
            logger.warning("outbox position commit failed (retried): %s", exc)
            return False
        self._m.offset_commit.observe(time.perf_counter() - started)
        if partition in self.committed:
            self.committed[partition] = position
        return True

    async def lag_loop(self, period_s: float = 5.0) -> None:
        """Export the Outbox lag of the served partitions; the broker's high watermarks
        are read off the event loop."""
        while True:
            served = dict(self.positions)
            try:
                if served:
                    hws = await self._consumer.high_watermarks(OUTBOX_TOPIC, list(served))
                    self._m.lag.set(sum(max(0, hws[p] - pos) for p, pos in served.items()))
            except EngineError as exc:
                logger.debug("outbox lag unavailable: %s", exc)
            await asyncio.sleep(period_s)

    async def close(self) -> None:
        """Commit the positions, flush and close the producers and the consumer."""
        await self.commit_position()
        await self._producer.close()
        await self._direct.close()
        await self._consumer.close()


def _observe_since(histogram, started: float, _fut: asyncio.Future) -> None:
    """A delivery's done-callback: `started` (time.perf_counter()) to now into `histogram`."""
    histogram.observe(time.perf_counter() - started)
