"""The producer bridge (qim/infra/kafka/bridge.py): the delivery reports of one poll
reach the event loop in one wake-up, not one per record, and every future still gets its
own (partition, offset) in produce order, or its own EngineError. Real Kafka, on topics
of each test's own: the session engines serve the session stack, whose fanout stops at
the first Outbox record it cannot decode (docs/architecture.md: an unplannable record
stops the coordinator), so nothing here writes into qim.outbox."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from qim.errors import EngineError
from qim.infra.kafka.bridge import AsyncProducer


def private_topic(bootstrap: str, partitions: int = 1) -> str:
    """A new topic of `partitions` partitions on the broker at `bootstrap`, named for one test."""
    topic = f"qim.test.bridge-{uuid.uuid4().hex[:12]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # referenced until its futures resolved
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        fut.result(30)
    return topic


async def test_deliveries_of_one_poll_share_one_wakeup(engines, monkeypatch):
    bootstrap = engines.env()["QIM_KAFKA_BOOTSTRAP"]
    topic = private_topic(bootstrap)
    producer = AsyncProducer(bootstrap)
    loop = asyncio.get_running_loop()
    wakeups = 0
    threadsafe = loop.call_soon_threadsafe

    def counted(*args, **kw):
        nonlocal wakeups
        wakeups += 1
        return threadsafe(*args, **kw)

    try:
        await producer.produce(topic, b"warm", key=b"k", partition=0)
        monkeypatch.setattr(loop, "call_soon_threadsafe", counted)
        futures = [producer.produce(topic, b"r%d" % i, key=b"k", partition=0) for i in range(200)]
        results = await asyncio.gather(*futures)
        offsets = [offset for _, offset in results]
        assert all(partition == 0 for partition, _ in results)
        assert offsets == sorted(offsets) and len(set(offsets)) == 200  # produce order, each its own
        assert wakeups <= 20, wakeups  # one per poll that reported (was one per record: 200)
    finally:
        await producer.close()


async def test_a_failed_delivery_is_an_engine_error(engines):
    bootstrap = engines.env()["QIM_KAFKA_BOOTSTRAP"]
    topic = private_topic(bootstrap)
    producer = AsyncProducer(bootstrap, {"message.timeout.ms": 2000})
    try:
        with pytest.raises(EngineError):
            # the topic has one partition: partition 7 does not exist
            await producer.produce(topic, b"x", partition=7)
        partition, _ = await producer.produce(topic, b"y", partition=0)  # and the producer goes on
        assert partition == 0
    finally:
        await producer.close()


async def test_a_partition_given_up_while_paused_and_taken_again_fetches_again(engines):
    """librdkafka keeps a partition's pause across unassign and assign: a mailbox shard
    given up with a full FIFO and taken back later never fetched again (found by the
    SIGSTOP takeover gate; docs/decisions/0040-scale-leases-and-fencing.md)."""
    from qim.infra.kafka.consumer import AsyncConsumer

    bootstrap = engines.env()["QIM_KAFKA_BOOTSTRAP"]
    topic = "qim.test.pause-reassign"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # referenced until its futures resolved
    for fut in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        fut.result(30)
    producer = AsyncProducer(bootstrap)
    consumer = AsyncConsumer(bootstrap, "qim-test-pause")
    try:
        await asyncio.gather(*(producer.produce(topic, b"r%d" % i, partition=1) for i in range(20)))
        await consumer.assign(topic, {})
        await consumer.add_partitions(topic, {1: 0})
        assert [m.offset() for m in await consumer.consume(5, 10.0)][:1] == [0]
        await consumer.pause(topic, [1])  # a full FIFO
        await consumer.remove_partitions(topic, [1])  # the shard is given up
        await consumer.add_partitions(topic, {1: 10})  # and taken again at its watermark
        got: list[int] = []
        for _ in range(40):
            got += [m.offset() for m in await consumer.consume(50, 0.25)]
            if len(got) >= 10:
                break
        assert got == list(range(10, 20))
        # taken again while still assigned (a shard lost and re-taken before its unassign
        # ran: found by tests/scale): it starts over at the new offset instead of failing
        await consumer.add_partitions(topic, {1: 15})
        got = []
        for _ in range(40):
            got += [m.offset() for m in await consumer.consume(50, 0.25)]
            if len(got) >= 5:
                break
        assert got == list(range(15, 20))
        await consumer.remove_partitions(topic, [0, 1])  # 0 was never assigned: left alone
        await consumer.remove_partitions(topic, [1])
    finally:
        await consumer.close()
        await producer.close()


async def test_records_already_fetched_are_taken_without_a_thread_handoff(engines):
    """A consume that finds records queued takes them on the loop (docs/decisions/0053):
    after the first batch, the rest of what one fetch brought costs no hand-off; every
    record arrives once, in log order."""
    from qim.infra.kafka.consumer import AsyncConsumer

    bootstrap = engines.env()["QIM_KAFKA_BOOTSTRAP"]
    topic = private_topic(bootstrap)
    producer = AsyncProducer(bootstrap)
    consumer = AsyncConsumer(bootstrap, "qim-test-bridge-take")
    try:
        start = (await consumer.high_watermarks(topic, [0]))[0]
        await asyncio.gather(*(producer.produce(topic, b"t%d" % i, partition=0) for i in range(40)))
        await consumer.assign(topic, {0: start})
        got: list[bytes] = []
        while len(got) < 40:
            got += [m.value() for m in await consumer.consume(10, 5.0)]
        assert got == [b"t%d" % i for i in range(40)]
        assert consumer.handoffs < 4, consumer.handoffs  # 4 batches of 10; a thread for each before
    finally:
        await consumer.close()
        await producer.close()



async def test_watermarks_are_read_while_the_consumers_thread_is_busy(engines):
    """Watermarks come from a client of their own (qim/infra/kafka/offsets.py): asked for
    while the consumer's only thread waits in a long consume of an idle partition, they
    are answered without it, for every partition, low and high as written; an unknown
    partition is an EngineError, not an empty answer."""
    from qim.infra.kafka.consumer import AsyncConsumer

    bootstrap = engines.env()["QIM_KAFKA_BOOTSTRAP"]
    topic = private_topic(bootstrap, partitions=4)
    producer = AsyncProducer(bootstrap)
    consumer = AsyncConsumer(bootstrap, "qim-test-bridge-offsets")
    try:
        await asyncio.gather(*(producer.produce(topic, b"x", partition=p) for p in (1, 3, 3)))
        await consumer.assign(topic, {0: 0})  # idle: the consume below holds the thread 30 s
        busy = asyncio.ensure_future(consumer.consume(1, 30.0))
        await asyncio.sleep(0.5)
        highs = await asyncio.wait_for(consumer.high_watermarks(topic, [0, 1, 2, 3]), 20)
        ranges = await asyncio.wait_for(consumer.watermark_ranges(topic, [1, 3]), 20)
        assert not busy.done()  # answered while the thread still waited
        assert highs == {0: 0, 1: 1, 2: 0, 3: 2}
        assert ranges == {1: (0, 1), 3: (0, 2)}
        with pytest.raises(EngineError):
            await consumer.high_watermarks(topic, [7], timeout=3)
        await producer.produce(topic, b"wake", partition=0)
        assert [m.value() for m in await busy] == [b"wake"]
    finally:
        await consumer.close()
        await producer.close()


async def test_earliest_starts_at_the_first_record_whatever_the_group_committed(engines):
    """EARLIEST (qim/infra/kafka/bridge.py) is the partition's first retained offset, not
    the group's committed position: the position is never asked of the group coordinator,
    whose lookup stalled on a fresh broker (docs/decisions/0060). A committed offset of the
    same group shows which one was used; -1 still means the committed position."""
    from qim.infra.kafka.consumer import EARLIEST, AsyncConsumer

    bootstrap = engines.env()["QIM_KAFKA_BOOTSTRAP"]
    topic = private_topic(bootstrap)
    producer = AsyncProducer(bootstrap)
    group = f"qim-test-bridge-earliest-{uuid.uuid4().hex[:8]}"
    first, second = AsyncConsumer(bootstrap, group), AsyncConsumer(bootstrap, group)
    try:
        await asyncio.gather(*(producer.produce(topic, b"e%d" % i, partition=0) for i in range(5)))
        await first.commit(topic, 0, 3)  # the group's committed position: offset 3
        await first.add_partitions(topic, {0: EARLIEST})
        await second.add_partitions(topic, {0: -1})

        async def read(consumer, n: int) -> list[bytes]:
            got: list[bytes] = []
            while len(got) < n:
                got += [m.value() for m in await consumer.consume(10, 5.0)]
            return got

        assert await asyncio.wait_for(read(first, 5), 30) == [b"e0", b"e1", b"e2", b"e3", b"e4"]
        assert await asyncio.wait_for(read(second, 2), 60) == [b"e3", b"e4"]
    finally:
        await first.close()
        await second.close()
        await producer.close()


def rdk_threads() -> int:
    """librdkafka's native threads in this process ("rdk:main", "rdk:broker…")."""
    count = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                count += f.read().startswith("rdk:")
        except FileNotFoundError:  # the thread ended meanwhile
            pass
    return count


async def test_close_destroys_the_handle_and_a_later_produce_is_refused():
    """A closed producer's broker threads end at once (before, they lived, dialling the
    broker, until garbage collection freed the handle); a record queued for a broker that
    never answers fails with EngineError; produce after close is an EngineError too."""
    before = rdk_threads()
    producer = AsyncProducer("127.0.0.1:1")  # nothing listens: the record stays queued
    assert rdk_threads() > before
    queued = producer.produce("qim.test.bridge-nowhere", b"x")
    await producer.close(timeout=0.2)
    assert rdk_threads() == before  # `producer` is still referenced: only close() ended them
    with pytest.raises(EngineError):
        await asyncio.wait_for(queued, 5)
    with pytest.raises(EngineError, match="the producer is closed"):
        producer.produce("qim.test.bridge-nowhere", b"y")
    await producer.close()  # a second close does nothing
