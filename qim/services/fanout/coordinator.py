"""FanoutCoordinator loop (docs/design.md §5.3): Outbox batch → dispatches → wait → commit.

The single Outbox partition is read by static assignment from the committed position.
Per batch: plan every record, produce every dispatch (partition = shard, key =
dispatch_id), await every delivery, then advance the position. Any failure leaves the
position where it was; the batch is re-read from its first offset (the only seek besides
the first positioning) and converges through dispatch_id. No Kafka transactions. An
unplannable record stops the coordinator (never skipped).

The position is committed synchronously by its own task (`_commit_loop`), never before
every dispatch below it is delivered, at once after an idle spell and then at most every
FANOUT_COMMIT_INTERVAL_S (docs/decisions/0026): the batch loop no longer waits a broker write (an
fsynced __consumer_offsets append) per batch, and a busy fanout writes one commit per
interval instead of one per batch. A crash replays at most one interval more, which
converges through dispatch_id like any replay (docs/decisions/0026).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Optional

from qim.consts import DISPATCH_TOPIC, FANOUT_COMMIT_INTERVAL_S, KAFKA_CONSUME_WAIT_S, OUTBOX_TOPIC
from qim.errors import EngineError
from qim.faults import FaultPoints
from qim.infra.kafka.bridge import AsyncConsumer, AsyncProducer
from qim.obs.logcontext import bind, tracer
from qim.services.fanout.metrics import FanoutMetrics
from qim.services.fanout.plan import MemberSnapshotCache, PlanError, parse_outbox, plan, snapshot_key
from qim.stores.groups import GroupStore

logger = logging.getLogger(__name__)

GROUP_ID = "qim-fanout"


class FanoutCoordinator:
    """`run()` loops until cancelled; `stopped_reason` is set when it stops on a bad record.
    Counts into `metrics` (a private FanoutMetrics when None)."""

    def __init__(self, bootstrap: str, shard_count: int, batch_size: int, faults: FaultPoints, groups: GroupStore,
                 metrics: Optional[FanoutMetrics] = None) -> None:
        self._m = metrics if metrics is not None else FanoutMetrics()
        self._faults = faults
        self._snapshots = MemberSnapshotCache(groups, shard_count)
        self._bootstrap = bootstrap
        self._shard_count = shard_count
        self._batch_size = batch_size
        self._consumer = AsyncConsumer(bootstrap, GROUP_ID)
        self._producer = AsyncProducer(bootstrap)
        self.position = -1  # next Outbox offset to fan out: every dispatch below it is delivered
        self.committed = -1  # the position last committed to the broker
        self._advanced = asyncio.Event()  # the position moved past `committed`
        self.stopped_reason = ""
        self.ready = False

    async def _position(self, timeout_s: float = 60.0) -> None:
        # A fresh broker answers NOT_COORDINATOR until its offsets topic is loaded:
        # retry (not ready meanwhile) instead of dying.
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                committed = (await self._consumer.committed(OUTBOX_TOPIC, [0]))[0]
                break
            except EngineError as exc:
                if time.monotonic() > deadline:
                    raise
                logger.info("waiting for the outbox position: %s", exc)
                await asyncio.sleep(0.5)
        self.position = self.committed = committed if committed >= 0 else 0
        await self._consumer.assign(OUTBOX_TOPIC, {0: self.position})
        self._m.position.set(self.position)

    async def run(self) -> None:
        """Position, then fan out batch after batch; returns only when stopped on an
        unplannable record (`stopped_reason`), never skipping it."""
        await self._position()
        self.ready = True
        committer = asyncio.get_running_loop().create_task(self._commit_loop(), name="fanout:commit")
        try:
            await self._fan_out()
        finally:
            committer.cancel()
            await asyncio.gather(committer, return_exceptions=True)

    async def _fan_out(self) -> None:
        while True:
            try:
                records = await self._consumer.consume(self._batch_size, KAFKA_CONSUME_WAIT_S)
            except EngineError as exc:
                logger.warning("outbox read failed: %s", exc)
                await asyncio.sleep(0.5)
                continue
            if not records:
                continue
            try:
                await self._process(records)
            except PlanError as exc:
                self._m.unplannable.inc()
                self.stopped_reason = str(exc)
                self.ready = False
                logger.error("fanout stopped at outbox offset %d: %s", records[0].offset(), exc)
                return
            except EngineError as exc:
                self._m.replays.inc()
                logger.warning("fanout batch failed, replaying from %d: %s", records[0].offset(), exc)
                await asyncio.sleep(0.5)
                await self._consumer.assign(OUTBOX_TOPIC, {0: self.position})

    async def _process(self, records: list) -> None:
        if records[0].offset() != self.position:
            # A discontinuity (e.g. a retention gap) is logged; positions are hints.
            logger.info("outbox position moved from %d to %d", self.position, records[0].offset())
        self._m.batch_records.observe(len(records))
        batch_started = time.perf_counter()
        outboxes = [parse_outbox(rec.value(), self._shard_count) for rec in records]
        # PlanError stops the coordinator; StoreUnavailable (an EngineError) replays the batch
        snapshots = await self._snapshots.load({k for k in map(snapshot_key, outboxes) if k is not None})
        futures = []
        for outbox in outboxes:
            key = snapshot_key(outbox)
            planned = plan(outbox, self._shard_count, snapshots.get(key) if key else None)
            for shard, dispatch in planned:
                futures.append(self._producer.produce(DISPATCH_TOPIC, dispatch.encode(),
                                                      key=dispatch.dispatch_id, partition=shard))
            if tracer.isEnabledFor(logging.DEBUG):
                with bind(trace=outbox.trace_id):
                    tracer.debug("dispatch records produced for shards %s", sorted(shard for shard, _ in planned))
        started = time.perf_counter()
        results = await asyncio.gather(*futures, return_exceptions=True)
        self._m.delivery_wait.observe(time.perf_counter() - started)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            raise EngineError(f"{len(failed)} of {len(results)} dispatch deliveries failed: {failed[0]}")
        self._m.dispatches.inc(len(results))
        self._m.stage.labels(stage="fanout").observe(time.perf_counter() - batch_started)
        self._faults.hit("after_dispatch")
        self.position = records[-1].offset() + 1
        self._m.position.set(self.position)
        self._advanced.set()

    async def _commit_loop(self) -> None:
        """Commit the position whenever it moved, at most every FANOUT_COMMIT_INTERVAL_S;
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
        """Commit the current position synchronously if it moved; False when the broker
        refused (logged)."""
        position = self.position
        if position <= self.committed:
            return True
        started = time.perf_counter()
        try:
            await self._consumer.commit(OUTBOX_TOPIC, 0, position)
        except EngineError as exc:
            logger.warning("outbox position commit failed (retried): %s", exc)
            return False
        self._m.offset_commit.observe(time.perf_counter() - started)
        self.committed = position
        return True

    async def lag_loop(self, period_s: float = 5.0) -> None:
        """Export the Outbox lag; the broker's high watermark is read off the event loop."""
        while True:
            try:
                hw = (await self._consumer.high_watermarks(OUTBOX_TOPIC, [0]))[0]
                if self.position >= 0:
                    self._m.lag.set(max(0, hw - self.position))
            except EngineError as exc:
                logger.debug("outbox lag unavailable: %s", exc)
            await asyncio.sleep(period_s)

    async def close(self) -> None:
        """Commit the position, flush and close the producer and the consumer."""
        if self.position >= 0:
            await self.commit_position()
        await self._producer.close()
        await self._consumer.close()
