"""HistoryArchiver: the Outbox's second, independent consumer (docs/design.md §5 step 7; seed
000 ADR-0018: "以独立消费组读 Outbox ... 批量普通 INSERT 写 Scylla（先记录后索引，无 LWT，同值
幂等）... 全部确认后才同步提交位点，再按“批前取 T0 与 Outbox 高水位 H0，位点 ≥ H0 后推进到 T0”
发布归档水位"; seed 004 §3; docs/decisions/0023-archive-tier.md).

Position: its own, in Redis (ArchiveStateStore.position_*), bound to the broker's cluster
id and the Outbox topic id like the session checkpoint, never a consumer-group offset.
It fails closed (stays up, not ready, the reason in /healthz) when the binding differs,
when its position is below the retained log start (records were lost to retention
before they were archived) or past the log end (the topic was re-created), on an Outbox
record it must not skip (qim/services/archiver/plan.py), or when the position moved
under it (two archivers).

Per batch: plan (retention classes from Redis), write every row and wait for every
acknowledgement (qim/stores/cql/archive.py: records and state changes, then the index),
queue the conversations for the trimmer, then move the position by compare-and-set. A
failed write is retried with backoff (the batch stays in memory; every write is
idempotent); a crash replays from the position, and so does a pass that failed on a
Redis or broker outage (the consumer is rewound to the position: never past a batch
whose rows were not written). It never blocks a send: a stalled
archiver only stops the trim.

Watermark: before reading, T0 = now and H0 = the Outbox high watermark; once the
position reaches H0, every record produced before T0 is archived, and the watermark
moves to T0 (only forward).

Partitions (docs/decisions/0041-scale-outbox-partitions.md, 0040-scale-leases-and-fencing.md):
each Outbox partition has its own position (fenced by the owner_epoch of the archiver
holding its lease in the ShardRegistry: a paused archiver's advance is refused and it
stops archiving that partition) and its own watermark; the archive watermark is their
lowest. Without a registry (tests, tools) `start()` takes every partition.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from typing import Callable, Optional, Sequence

from qim.consts import KAFKA_BATCH_FETCH, OUTBOX_TOPIC
from qim.errors import EngineError
from qim.faults import FaultPoints
from qim.infra.kafka.consumer import AsyncConsumer
from qim.infra.kafka.identity import wait_topic_identity
from qim.services.archiver.metrics import ArchiverMetrics
from qim.services.archiver.plan import ArchivePlanError, plan, records_of
from qim.stores.archive import ArchiveStateStore, ArchiveStore
from qim.stores.errors import CheckpointConflict, NotOwner, StorageError

logger = logging.getLogger(__name__)

GROUP_ID = "qim-archiver"  # librdkafka needs one; nothing is ever committed under it
MARK_PERIOD_S = 0.5  # a new (T0, H0) at most this often
RETRY_MAX_S = 5.0


def now_ms() -> int:
    """Wall clock in ms (the watermark's T0)."""
    return time.time_ns() // 1_000_000


class HistoryArchiver:
    """`start()` binds; `run()` archives until cancelled or failed closed. `partitions`:
    what `start()` takes without a registry (None: every partition of the Outbox; with a
    registry `()`, and `add_partition` / `remove_partition` from the node's keeper);
    `on_lost(partition, reason)` when a fence refused a position advance."""

    def __init__(self, bootstrap: str, state: ArchiveStateStore, archive: ArchiveStore, batch_size: int,
                 default_retention_days: int, faults: Optional[FaultPoints] = None,
                 metrics: Optional[ArchiverMetrics] = None, partitions: Optional[Sequence[int]] = None,
                 on_lost: Optional[Callable[[int, str], None]] = None) -> None:
        self._m = metrics if metrics is not None else ArchiverMetrics()
        self._bootstrap = bootstrap
        self._state = state
        self._archive = archive
        self._batch_size = batch_size
        self._days = default_retention_days
        self._faults = faults or FaultPoints()
        # nobody waits on the archive tier: large fetches (docs/decisions/0053)
        self._consumer = AsyncConsumer(bootstrap, GROUP_ID, KAFKA_BATCH_FETCH)
        self._static = partitions
        self._on_lost = on_lost
        self._binding = ""
        self.partition_count = 0
        self._marks: dict[int, tuple[int, int]] = {}  # partition -> (T0 ms, H0 offset)
        self._mark_at = 0.0
        self.next: dict[int, int] = {}  # served partition -> next offset
        self.fences: dict[int, int] = {}
        self.stopped = ""
        self.running = False

    def not_ready(self) -> Optional[str]:
        """Why the archiver is not archiving, or None."""
        if self.stopped:
            return f"archiver failed closed: {self.stopped}"
        if not self.running:
            return "archiver not running"
        return None

    def _fail_closed(self, reason: str) -> None:
        self.stopped = reason
        self._m.unarchivable.inc()
        logger.error("archiver stopped: %s", reason)

    async def start(self) -> None:
        """Bind to the Outbox (and take the static partitions). EngineError when the broker
        stays unreachable; every other problem fails closed (module docstring)."""
        cluster, topic_id, parts = await wait_topic_identity(self._bootstrap, OUTBOX_TOPIC)
        self._binding = f"{cluster}|{topic_id}|{parts}"
        self.partition_count = parts
        for partition in range(parts) if self._static is None else self._static:
            if self.stopped:
                break
            await self.add_partition(partition, 0)

    async def add_partition(self, partition: int, owner_epoch: int) -> None:
        """Archive Outbox `partition` as owner `owner_epoch` from its fenced position.
        NotOwner when a newer owner fenced it; EngineError on an outage; a position that
        must not be used fails the archiver closed."""
        if self.stopped:  # held, never archived: the reason is in /healthz
            return
        ckpt = await self._state.position_bind(self._binding, partition, owner_epoch)
        if ckpt.status == "MISMATCH":
            return self._fail_closed(f"position bound to {ckpt.binding}, the broker has {self._binding}")
        start = ckpt.offsets[0]
        low, high = (await self._consumer.watermark_ranges(OUTBOX_TOPIC, [partition]))[partition]
        if start < low:
            return self._fail_closed(f"partition {partition}: position {start} is below the retained Outbox start "
                                     f"{low}: records were lost to retention before they were archived")
        if start > high:
            return self._fail_closed(f"partition {partition}: position {start} is past the Outbox end {high}")
        self.next[partition], self.fences[partition] = start, owner_epoch
        await self._consumer.add_partitions(OUTBOX_TOPIC, {partition: start})
        self._m.position.set(sum(self.next.values()))
        logger.info("archiver at outbox partition %d offset %d (%s, owner_epoch %d)", partition, start,
                    "new position" if ckpt.status == "NEW" else "resumed", owner_epoch)

    async def remove_partition(self, partition: int, reason: str) -> None:
        """Stop archiving `partition` at once. Never raises."""
        if self.next.pop(partition, None) is None:
            return
        self.fences.pop(partition, None)
        self._marks.pop(partition, None)
        try:
            await self._consumer.remove_partitions(OUTBOX_TOPIC, [partition])
        except EngineError as exc:
            logger.warning("outbox partition %d: unassign failed: %s", partition, exc)
        logger.info("archiver stopped archiving outbox partition %d: %s", partition, reason)

    async def _take_mark(self) -> None:
        if self._marks or not self.next or time.monotonic() - self._mark_at < MARK_PERIOD_S:
            return
        t0 = now_ms()  # before H0: whatever was produced before T0 lies below H0
        highs = await self._consumer.high_watermarks(OUTBOX_TOPIC, list(self.next))
        self._marks, self._mark_at = {p: (t0, h) for p, h in highs.items()}, time.monotonic()
        self._m.lag.set(sum(max(0, h - self.next.get(p, h)) for p, h in highs.items()))

    async def _publish_marks(self) -> None:
        for partition, (t0, high) in list(self._marks.items()):
            if self.next.get(partition, -1) < high:
                continue
            wm = await self._state.advance_watermark(t0, partition, self.partition_count)
            # remove_partition (a lease lapsed) may have dropped the mark meanwhile: the
            # watermark it advanced was still true, everything below H0 was archived
            self._marks.pop(partition, None)
            self._m.watermark.set(wm)
            self._m.watermark_lag.set(max(0.0, (now_ms() - wm) / 1000))

    async def run(self) -> None:
        """Archive batch after batch until cancelled or failed closed."""
        if self.stopped:
            return
        self.running = True
        delay = 0.2
        rewind = False
        try:
            while not self.stopped:
                try:
                    if rewind and self.next:  # a failed pass: its batch again from the position, never past it
                        await self._consumer.add_partitions(OUTBOX_TOPIC, dict(self.next))
                        rewind = False
                    await self._take_mark()
                    msgs = await self._consumer.consume(self._batch_size, MARK_PERIOD_S)
                    if msgs:
                        await self._batch(msgs)
                    await self._publish_marks()
                    delay = 0.2
                except NotOwner as exc:  # a newer owner fenced a partition: stop archiving it
                    await self._lost(exc)
                except (EngineError, StorageError) as exc:  # broker or Redis outage: nothing moved
                    if isinstance(exc, CheckpointConflict):
                        return self._fail_closed(f"position: {exc.reason or 'refused'} {exc.message}")
                    # the consumer is past the batch it handed over: without the rewind the
                    # next pass would start after it and move the position over records
                    # never written (a Redis instance down at the retention read: issue 35 §3)
                    rewind = True
                    logger.warning("archiver pass failed (%s); retrying from the position", exc)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, RETRY_MAX_S)
        finally:
            self.running = False

    async def _lost(self, exc: NotOwner) -> None:
        partition = exc.shard if exc.shard is not None else -1
        logger.error("outbox partition %d: position advance refused (%s); stopping it", partition, exc.message)
        self._m.fenced.inc()
        await self.remove_partition(partition, "refused by a newer owner's fence")
        if self._on_lost is not None:
            self._on_lost(partition, "refused")

    async def _batch(self, msgs: list) -> None:
        msgs = [m for m in msgs if m.offset() >= self.next.get(m.partition(), 1 << 62)]
        if not msgs:
            return
        first: dict[int, int] = {}
        for m in msgs:
            first.setdefault(m.partition(), m.offset())
        for partition, offset in first.items():
            if offset != self.next[partition]:
                logger.info("outbox partition %d position moved from %d to %d", partition, self.next[partition],
                            offset)
        where = f"outbox offsets {msgs[0].offset()}..{msgs[-1].offset()}"
        try:
            recs = records_of([m.value() for m in msgs])
        except ArchivePlanError as exc:
            return self._fail_closed(f"{where}: {exc}")
        by_tenant: dict[int, list[bytes]] = defaultdict(list)
        for r in recs:
            by_tenant[int.from_bytes(r.tenant_id, "big")].append(r.conversation_id)
        classes = {}
        for tenant, convs in by_tenant.items():
            convs = list(dict.fromkeys(convs))
            for conv, cls in zip(convs, await self._state.retention_classes(tenant, convs)):
                classes[(tenant, conv)] = cls
        try:
            batches = plan(recs, classes, self._days, now_ms())
        except ArchivePlanError as exc:
            return self._fail_closed(f"{where}: {exc}")
        await self._write(batches)
        self._faults.hit("after_write")
        for tenant, b in batches.items():
            await self._state.mark_archived(tenant, b.oldest)
        last: dict[int, int] = {}
        for m in msgs:
            last[m.partition()] = m.offset() + 1
        for partition, new in sorted(last.items()):
            if partition not in self.next:
                continue  # given up while the batch was written (its rows are idempotent)
            await self._state.position_advance(self._binding, self.next[partition], new, partition,
                                               self.fences[partition])
            self.next[partition] = new
        self._m.position.set(sum(self.next.values()))
        self._m.records.inc(len(msgs))
        self._m.batch_records.observe(len(msgs))
        for b in batches.values():
            self._m.rows_written.inc(len(b.records))
            self._m.state_changes.inc(len(b.changes))
            self._m.expired.inc(b.expired)
    async def _write(self, batches) -> None:
        """Write every tenant's rows, retrying a failed write with backoff until it is
        acknowledged (idempotent; the Outbox is not read meanwhile)."""
        delay = 0.2
        while True:
            started = time.perf_counter()
            try:
                for tenant, b in batches.items():
                    await self._archive.write(tenant, b.records, b.changes)
                self._m.batch_seconds.observe(time.perf_counter() - started)
                return
            except EngineError as exc:  # StoreUnavailable: the archive is down or slow
                self._m.write_failures.inc()
                logger.warning("archive write failed (%s); writing the batch again in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)

    async def close(self) -> None:
        """Close the Outbox consumer."""
        await self._consumer.close()
