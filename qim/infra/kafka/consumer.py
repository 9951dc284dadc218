"""The consumer half of the confluent-kafka thread bridge (the producer and the metadata
calls: qim/infra/kafka/bridge.py).

Consumer calls run on a dedicated single-thread executor, except a consume that finds
records already queued (a non-blocking take on the loop: no thread hand-off per batch
under load). Idle cost and fetch settings: qim/consts.py
(docs/decisions/0053-kafka-idle-and-batching.md).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from typing import Any, Optional

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from qim.consts import (
    KAFKA_ASSIGN_METADATA_S,
    KAFKA_CONSUMER_FETCH_WAIT_MS,
    KAFKA_MAX_RECORD_BYTES,
    KAFKA_OFFSETS_TIMEOUT_S,
)
from qim.errors import EngineError
from qim.infra.kafka.debug import with_debug
from qim.infra.kafka.offsets import OffsetReader

logger = logging.getLogger(__name__)


# Start a partition at its first retained offset without asking the group coordinator.
# The committed position (an offset of -1) is fetched from the coordinator first, and on
# a fresh broker that fetch stalled: 3 of 4 consumers assigned that way had not read a
# record after 60 s, while every one starting at EARLIEST read it within 0.6 s
# (docs/decisions/0060-offsets-off-the-fetch-connection.md).
EARLIEST = OFFSET_BEGINNING


def _positions(topic: str, partitions_offsets: dict[int, int]) -> list:
    return [TopicPartition(topic, p, o) if o >= 0 or o == EARLIEST else TopicPartition(topic, p)
            for p, o in partitions_offsets.items()]


class AsyncConsumer:
    """A statically assigned consumer (no group rebalancing, docs/design.md §8).

    Offsets are committed explicitly (`commit`) under `group_id`; positions are hints,
    watermarks are truth. Blocking librdkafka calls run on one private thread; `extra`
    overrides settings (KAFKA_BATCH_FETCH for a consumer no user waits on).
    """

    def __init__(self, bootstrap: str, group_id: str, extra: Optional[dict[str, Any]] = None) -> None:
        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": KAFKA_MAX_RECORD_BYTES * 2,
            "max.partition.fetch.bytes": KAFKA_MAX_RECORD_BYTES,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": KAFKA_CONSUMER_FETCH_WAIT_MS,
        }
        conf.update(extra or {})
        self._consumer = Consumer(with_debug(conf))
        self._offsets = OffsetReader(bootstrap)
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="qim-kafka-consumer")
        self._calls = 0  # calls of ours on the private thread right now
        self.handoffs = 0  # consume calls that waited on the private thread (the rest took queued records)
        self.metadata_misses = 0  # assignments made before the leaders were known (_leaders_then)
        self._leaders_known: set[str] = set()  # topics whose leaders this consumer has read

    async def _run(self, fn, *args):
        self._calls += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        except KafkaException as exc:
            raise EngineError(f"kafka consumer call failed: {exc}") from exc
        finally:
            self._calls -= 1

    async def assign(self, topic: str, partitions_offsets: dict[int, int]) -> None:
        """Assign partitions at explicit start offsets (`EARLIEST`: the first retained
        offset; any other offset < 0: the committed position, else the earliest)."""
        tps = _positions(topic, partitions_offsets)
        await self._run(self._leaders_then, topic, lambda: self._consumer.assign(tps))

    async def add_partitions(self, topic: str, partitions_offsets: dict[int, int]) -> None:
        """Add partitions to the assignment at explicit start offsets, keeping the others
        (a shard taken over; docs/decisions/0040-scale-leases-and-fencing.md), never
        paused: librdkafka keeps a partition's pause across unassign and assign, so a
        shard given up while paused (a full FIFO) and taken again would never fetch. A
        partition still in the assignment (a shard lost and taken again before its
        unassign ran) starts over at the given offset instead of failing."""
        tps = _positions(topic, partitions_offsets)

        def assign() -> None:
            held = {tp.partition for tp in self._consumer.assignment() if tp.topic == topic}
            again = [TopicPartition(topic, p) for p in partitions_offsets if p in held]
            if again:
                self._consumer.incremental_unassign(again)
            self._consumer.incremental_assign(tps)
            self._consumer.resume([TopicPartition(topic, p) for p in partitions_offsets])
        await self._run(self._leaders_then, topic, assign)

    def _leaders_then(self, topic: str, assign: Any) -> None:
        """`assign()` once the topic's partition leaders are known (private thread): without
        them librdkafka began fetching ~0.9 s after a first assignment (decision 0160). Read
        once per topic: behind a fetch in flight on the same connection the read waits out
        its long poll (64 shards taken one by one took 30 s). A head start only: past
        KAFKA_ASSIGN_METADATA_S the assignment is made anyway and counted in
        `metadata_misses`; librdkafka then asks for the leaders itself, as before."""
        if topic not in self._leaders_known:
            try:
                self._consumer.list_topics(topic, timeout=KAFKA_ASSIGN_METADATA_S)
                self._leaders_known.add(topic)
            except KafkaException:
                self.metadata_misses += 1
        assign()

    async def remove_partitions(self, topic: str, partitions: list[int]) -> None:
        """Drop partitions from the assignment (a shard given up or lost); nothing of them
        is delivered afterwards. Partitions not in the assignment are left alone."""
        def unassign() -> None:
            held = {tp.partition for tp in self._consumer.assignment() if tp.topic == topic}
            gone = [TopicPartition(topic, p) for p in partitions if p in held]
            if gone:
                self._consumer.incremental_unassign(gone)
        await self._run(unassign)

    async def positions(self, topic: str, partitions: list[int]) -> dict[int, int]:
        """The next offset this consumer fetches per partition (-1 when not known yet)."""
        tps = await self._run(self._consumer.position, [TopicPartition(topic, p) for p in partitions])
        return {tp.partition: tp.offset if tp.offset >= 0 else -1 for tp in tps}

    async def committed(self, topic: str, partitions: list[int], timeout: float = 10.0) -> dict[int, int]:
        """Committed offsets per partition (-1 when none)."""
        tps = await self._run(self._consumer.committed, [TopicPartition(topic, p) for p in partitions], timeout)
        return {tp.partition: tp.offset for tp in tps}

    async def high_watermarks(self, topic: str, partitions: list[int], timeout: float = KAFKA_OFFSETS_TIMEOUT_S) -> dict[int, int]:
        """High watermark (next offset to be written) per partition, from the broker, in
        one request off this consumer's connection and thread (offsets.py)."""
        return await self._offsets.highs(topic, partitions, timeout)

    async def watermark_ranges(self, topic: str, partitions: list[int], timeout: float = KAFKA_OFFSETS_TIMEOUT_S) -> dict[int, tuple[int, int]]:
        """(low, high) watermark per partition, from the broker: the first retained offset
        and the next offset to be written (as high_watermarks, off this consumer's thread)."""
        return await self._offsets.ranges(topic, partitions, timeout)

    async def consume(self, max_records: int, timeout: float) -> list:
        """Up to max_records messages (may be empty after `timeout` s; returns as soon as
        one is there). A message carrying a broker error other than partition EOF raises
        EngineError.

        Records already fetched are taken on the loop without waiting (librdkafka's
        consume with timeout 0 only dequeues), then the loop is yielded once so a caller
        that consumes in a loop never starves its other tasks; only an empty queue waits
        on the private thread (the hand-off was 17 % of the mailbox's samples)."""
        msgs: list = []
        if not self._calls:  # the consumer is not in use on the private thread
            try:
                msgs = self._consumer.consume(max_records, 0)
            except KafkaException as exc:
                raise EngineError(f"kafka consumer call failed: {exc}") from exc
        if msgs:
            await asyncio.sleep(0)
        else:
            self.handoffs += 1
            msgs = await self._run(self._take, max_records, timeout)
        out = []
        for m in msgs:
            err = m.error()
            if err is None:
                out.append(m)
            elif err.code() != KafkaError._PARTITION_EOF:
                raise EngineError(f"kafka consume error: {err.str()}")
        return out

    def _take(self, max_records: int, timeout: float) -> list:
        # consume(n, t) waits until n records or t: at low rates that adds up to t to every
        # record's latency. Wait for the first record only, then take what is queued.
        first = self._consumer.consume(1, timeout)
        if not first or max_records <= 1:
            return first
        return first + self._consumer.consume(max_records - 1, 0)

    async def commit(self, topic: str, partition: int, next_offset: int) -> None:
        """Synchronously commit `next_offset` (the next record to read) for one partition."""
        await self._run(lambda: self._consumer.commit(offsets=[TopicPartition(topic, partition, next_offset)], asynchronous=False))

    async def pause(self, topic: str, partitions: list[int]) -> None:
        """Stop fetching these partitions (a full shard FIFO)."""
        await self._run(self._consumer.pause, [TopicPartition(topic, p) for p in partitions])

    async def resume(self, topic: str, partitions: list[int]) -> None:
        """Fetch these partitions again."""
        await self._run(self._consumer.resume, [TopicPartition(topic, p) for p in partitions])

    async def close(self) -> None:
        """Close the consumer on its own thread (no offsets are committed: auto-commit is off)."""
        await self._run(self._consumer.close)
        self._executor.shutdown(wait=False)
