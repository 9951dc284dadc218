"""The producer bridge (qim/infra/kafka/bridge.py; issue 12): the delivery reports of one
poll reach the event loop in one wake-up, not one per record, and every future still gets
its own (partition, offset) in produce order, or its own EngineError. Real Kafka."""

from __future__ import annotations

import asyncio

import pytest

from qim.consts import OUTBOX_TOPIC
from qim.errors import EngineError
from qim.infra.kafka.bridge import AsyncProducer


async def test_deliveries_of_one_poll_share_one_wakeup(engines, monkeypatch):
    producer = AsyncProducer(engines.env()["QIM_KAFKA_BOOTSTRAP"])
    loop = asyncio.get_running_loop()
    wakeups = 0
    threadsafe = loop.call_soon_threadsafe

    def counted(*args, **kw):
        nonlocal wakeups
        wakeups += 1
        return threadsafe(*args, **kw)

    try:
        await producer.produce(OUTBOX_TOPIC, b"warm", key=b"k", partition=0)
        monkeypatch.setattr(loop, "call_soon_threadsafe", counted)
        futures = [producer.produce(OUTBOX_TOPIC, b"r%d" % i, key=b"k", partition=0) for i in range(200)]
        results = await asyncio.gather(*futures)
        offsets = [offset for _, offset in results]
        assert all(partition == 0 for partition, _ in results)
        assert offsets == sorted(offsets) and len(set(offsets)) == 200  # produce order, each its own
        assert wakeups <= 20, wakeups  # one per poll that reported (was one per record: 200)
    finally:
        await producer.close()


async def test_a_failed_delivery_is_an_engine_error(engines):
    producer = AsyncProducer(engines.env()["QIM_KAFKA_BOOTSTRAP"], {"message.timeout.ms": 2000})
    try:
        with pytest.raises(EngineError):
            # the Outbox has one partition: partition 7 does not exist
            await producer.produce(OUTBOX_TOPIC, b"x", partition=7)
        partition, _ = await producer.produce(OUTBOX_TOPIC, b"y", partition=0)  # and the producer goes on
        assert partition == 0
    finally:
        await producer.close()


async def test_records_already_fetched_are_taken_without_a_thread_handoff(engines):
    """A consume that finds records queued takes them on the loop (docs/decisions/0053):
    after the first batch, the rest of what one fetch brought costs no hand-off; every
    record arrives once, in log order."""
    from qim.infra.kafka.bridge import AsyncConsumer

    bootstrap = engines.env()["QIM_KAFKA_BOOTSTRAP"]
    producer = AsyncProducer(bootstrap)
    consumer = AsyncConsumer(bootstrap, "qim-test-bridge-take")
    try:
        start = (await consumer.high_watermarks(OUTBOX_TOPIC, [0]))[0]
        await asyncio.gather(*(producer.produce(OUTBOX_TOPIC, b"t%d" % i, partition=0) for i in range(40)))
        await consumer.assign(OUTBOX_TOPIC, {0: start})
        got: list[bytes] = []
        while len(got) < 40:
            got += [m.value() for m in await consumer.consume(10, 5.0)]
        assert got == [b"t%d" % i for i in range(40)]
        assert consumer.handoffs < 4, consumer.handoffs  # 4 batches of 10; a thread for each before
    finally:
        await consumer.close()
        await producer.close()
