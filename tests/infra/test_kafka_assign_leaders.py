"""A consumer asks for a topic's partition leaders before its first assignment of the
topic (qim/infra/kafka/consumer.py `_leaders_then`, docs/decisions/0160): assigned a topic it
had no metadata of, librdkafka began fetching about 0.9 s later, and a stack's first
messages (or a taken-over shard's) waited that long at the fanout and the mailbox. The
read is a head start only: with no broker the assignment is still made."""

from __future__ import annotations

import asyncio
from typing import Any

from confluent_kafka import TopicPartition

from qim.infra.kafka.bridge import AsyncProducer
from qim.infra.kafka.consumer import AsyncConsumer
from tests.infra.test_kafka_bridge import private_topic


class Recorder:
    """The librdkafka consumer with the names of the calls made on it, in order."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if callable(attr) and name in ("list_topics", "assign", "incremental_assign"):
            def call(*args, **kw):
                self.calls.append(name)
                return attr(*args, **kw)
            return call
        return attr


async def test_the_leaders_are_read_before_every_assignment_and_the_records_follow(engines):
    bootstrap = engines.env()["QIM_KAFKA_BOOTSTRAP"]
    topic = private_topic(bootstrap, partitions=2)
    producer = AsyncProducer(bootstrap)
    consumer = AsyncConsumer(bootstrap, "qim-test-leaders")
    rec = consumer._consumer = Recorder(consumer._consumer)  # type: ignore[assignment]
    try:
        await consumer.assign(topic, {0: 0})
        await consumer.add_partitions(topic, {1: 0})
        # read once per topic: a second read would wait behind the fetch in flight
        assert rec.calls == ["list_topics", "assign", "incremental_assign"]
        assert consumer.metadata_misses == 0
        await asyncio.gather(*(producer.produce(topic, b"r%d" % p, partition=p) for p in (0, 1)))
        got: list[bytes] = []
        for _ in range(40):
            got += [m.value() for m in await consumer.consume(10, 0.25)]
            if len(got) >= 2:
                break
        assert sorted(got) == [b"r0", b"r1"]
    finally:
        await consumer.close()
        await producer.close()


async def test_without_a_broker_the_assignment_is_made_and_the_miss_counted():
    consumer = AsyncConsumer("127.0.0.1:1", "qim-test-leaders-none", {"socket.connection.setup.timeout.ms": 1000})
    try:
        await consumer.assign("qim.test.nobroker", {0: 5})
        await consumer.add_partitions("qim.test.nobroker", {1: 7})
        assert consumer.metadata_misses == 2  # not known: tried again at the next assignment
        held = {(tp.partition, tp.offset) for tp in consumer._consumer.assignment()}
        assert held == {(0, 5), (1, 7)}
        assert TopicPartition("qim.test.nobroker", 0) in consumer._consumer.assignment()
    finally:
        await consumer.close()
