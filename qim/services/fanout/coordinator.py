"""FanoutCoordinator loop (DESIGN.md §5.3): Outbox batch → dispatches → wait → commit.

The single Outbox partition is read by static assignment from the committed position.
Per batch: plan every record, produce every dispatch (partition = shard, key =
dispatch_id), await every delivery, then commit the source offset synchronously. Any
failure leaves the position where it was; the batch is re-read from its first offset
(the only seek besides the first positioning) and converges through dispatch_id.
No Kafka transactions. An unplannable record stops the coordinator (never skipped).
"""

from __future__ import annotations

import asyncio
import logging
import time

from prometheus_client import Counter, Gauge, Histogram

from qim.consts import DISPATCH_TOPIC, OUTBOX_TOPIC
from qim.errors import EngineError
from qim.faults import FaultPoints
from qim.infra.kafka.bridge import AsyncConsumer, AsyncProducer
from qim.services.fanout.plan import PlanError, SnapshotCache, parse_outbox, plan, snapshot_key

logger = logging.getLogger(__name__)

GROUP_ID = "qim-fanout"
BATCH = Histogram("qim_fanout_batch_records", "Outbox records per batch", buckets=(1, 4, 16, 64, 256, 512, 1024))
DELIVERY_WAIT = Histogram("qim_fanout_delivery_wait_seconds", "Wait for all dispatch deliveries of a batch")
COMMIT_TIME = Histogram("qim_fanout_offset_commit_seconds", "Synchronous source offset commit")
DISPATCHES = Counter("qim_fanout_dispatches", "Dispatch records produced")
REPLAYS = Counter("qim_fanout_batch_replays", "Batches re-read after a failure")
POSITION = Gauge("qim_fanout_outbox_position", "Next Outbox offset to read")
LAG = Gauge("qim_fanout_outbox_lag", "Outbox records not yet fanned out (high watermark - position)")
UNPLANNABLE = Counter("qim_fanout_unplannable_records", "Outbox records that could not be planned (must stay 0)")


class FanoutCoordinator:
    """`run()` loops until cancelled; `stopped_reason` is set when it stops on a bad record."""

    def __init__(self, bootstrap: str, shard_count: int, batch_size: int, faults: FaultPoints, redis) -> None:
        self._faults = faults
        self._snapshots = SnapshotCache(redis, shard_count)
        self._bootstrap = bootstrap
        self._shard_count = shard_count
        self._batch_size = batch_size
        self._consumer = AsyncConsumer(bootstrap, GROUP_ID)
        self._producer = AsyncProducer(bootstrap)
        self.position = -1
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
        self.position = committed if committed >= 0 else 0
        await self._consumer.assign(OUTBOX_TOPIC, {0: self.position})
        POSITION.set(self.position)

    async def run(self) -> None:
        await self._position()
        self.ready = True
        while True:
            try:
                records = await self._consumer.consume(self._batch_size, 0.2)
            except EngineError as exc:
                logger.warning("outbox read failed: %s", exc)
                await asyncio.sleep(0.5)
                continue
            if not records:
                continue
            try:
                await self._process(records)
            except PlanError as exc:
                UNPLANNABLE.inc()
                self.stopped_reason = str(exc)
                self.ready = False
                logger.error("fanout stopped at outbox offset %d: %s", records[0].offset(), exc)
                return
            except EngineError as exc:
                REPLAYS.inc()
                logger.warning("fanout batch failed, replaying from %d: %s", records[0].offset(), exc)
                await asyncio.sleep(0.5)
                await self._consumer.assign(OUTBOX_TOPIC, {0: self.position})

    async def _process(self, records: list) -> None:
        if records[0].offset() != self.position:
            # A discontinuity (e.g. a retention gap) is logged; positions are hints.
            logger.info("outbox position moved from %d to %d", self.position, records[0].offset())
        BATCH.observe(len(records))
        outboxes = [parse_outbox(rec.value(), self._shard_count) for rec in records]
        try:
            snapshots = await self._snapshots.load({k for k in map(snapshot_key, outboxes) if k is not None})
        except PlanError:
            raise
        except Exception as exc:  # Redis unreachable: the batch replays later
            raise EngineError(f"member snapshot read failed: {exc.__class__.__name__}") from exc
        futures = []
        for outbox in outboxes:
            key = snapshot_key(outbox)
            for shard, dispatch in plan(outbox, self._shard_count, snapshots.get(key) if key else None):
                futures.append(self._producer.produce(DISPATCH_TOPIC, dispatch.encode(),
                                                      key=dispatch.dispatch_id, partition=shard))
        started = time.perf_counter()
        results = await asyncio.gather(*futures, return_exceptions=True)
        DELIVERY_WAIT.observe(time.perf_counter() - started)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            raise EngineError(f"{len(failed)} of {len(results)} dispatch deliveries failed: {failed[0]}")
        DISPATCHES.inc(len(results))
        self._faults.hit("after_dispatch")
        next_offset = records[-1].offset() + 1
        started = time.perf_counter()
        await self._consumer.commit(OUTBOX_TOPIC, 0, next_offset)
        COMMIT_TIME.observe(time.perf_counter() - started)
        self.position = next_offset
        POSITION.set(next_offset)

    async def lag_loop(self, period_s: float = 5.0) -> None:
        """Export the Outbox lag; the broker's high watermark is read off the event loop."""
        while True:
            try:
                hw = (await self._consumer.high_watermarks(OUTBOX_TOPIC, [0]))[0]
                if self.position >= 0:
                    LAG.set(max(0, hw - self.position))
            except EngineError as exc:
                logger.debug("outbox lag unavailable: %s", exc)
            await asyncio.sleep(period_s)

    async def close(self) -> None:
        await self._producer.close()
        await self._consumer.close()
