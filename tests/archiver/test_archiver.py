"""The HistoryArchiver against real engines: a private Kafka and Redis, a
keyspace of the shared Cassandra node, the archiver in this process. It archives what the
Outbox holds (a recall included) and moves its position and the watermark only after the
rows are written; it fails closed, archiving nothing past the point, on a position bound
elsewhere, a position below the retained log start and a record it must not skip."""

from __future__ import annotations

import asyncio
import secrets
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from qim.consts import MESSAGE_TYPE_CONTROL, OUTBOX_TOPIC
from qim.infra.kafka.bridge import AsyncProducer
from qim.proto.v1 import internal_pb2, message_pb2
from qim.services.archiver.archiver import HistoryArchiver
from qim.stores.messages import NEWER
from qim.stores.open import open_archive_tier
from qim.wire.outbox import encode
from tests.e2e.archive import drop_keyspace

CONV = b"\x01" + bytes(range(1, 16))


def record(seq: int, body: bytes = b"b", mtype: int = 1) -> message_pb2.MessageRecord:
    created = int(time.time() * 1000) - 1000 + seq
    return message_pb2.MessageRecord(tenant_id=bytes(16), message_id=created.to_bytes(6, "big") + bytes([seq]) + bytes(9),
                                     conversation_id=CONV, conversation_seq=seq, sender_id=5, created_at_ms=created,
                                     message_type=mtype, body=body)


def outbox(rec: message_pb2.MessageRecord) -> bytes:
    return encode(internal_pb2.OutboxRecord(shard_count=8).SerializeToString(), rec.SerializeToString())


@pytest.fixture
async def env(private_kafka, private_redis, shared_cassandra):
    keyspace = f"qim_arch_{secrets.token_hex(4)}"
    tier = open_archive_tier(private_redis.addr, shared_cassandra.scylla(keyspace))
    await tier.apply_schema()
    producer = AsyncProducer(private_kafka.addr)
    yield private_kafka.addr, tier, producer
    await producer.close()
    await tier.close()
    await asyncio.to_thread(drop_keyspace, shared_cassandra, keyspace)


async def produce(producer, values: list[bytes]) -> None:
    for fut in [producer.produce(OUTBOX_TOPIC, v, key=b"k", partition=0) for v in values]:
        await fut


async def running(archiver: HistoryArchiver, until, timeout: float = 30.0):
    await archiver.start()
    task = asyncio.create_task(archiver.run())
    try:
        for _ in range(int(timeout / 0.05)):
            if await until():
                return
            assert not task.done(), archiver.stopped
            await asyncio.sleep(0.05)
        raise AssertionError(f"archiver did not get there: {archiver.stopped or archiver.next}")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await archiver.close()


async def test_archives_the_outbox_then_moves_position_and_watermark(env):
    bootstrap, tier, producer = env
    recs = [record(s, b"m%d" % s) for s in range(1, 6)]
    body = message_pb2.ControlEvent(state_change=message_pb2.MessageStateChange(
        message_id=recs[1].message_id, state=message_pb2.MESSAGE_STATE_RECALLED, conversation_seq=2))
    recs.append(record(6, body.SerializeToString(), MESSAGE_TYPE_CONTROL))
    await produce(producer, [outbox(r) for r in recs] + [outbox(recs[0])])  # the first one twice
    before = int(time.time() * 1000)
    archiver = HistoryArchiver(bootstrap, tier.state, tier.archive, 4, 30)

    async def done():
        return await tier.state.position() == 7 and await tier.state.watermark() >= before

    await running(archiver, done)
    page = await tier.cold.history_page(0, CONV, ((0, None),), 0, NEWER, 10, 1 << 20)
    assert [r.conversation_seq for r in page.records] == [1, 2, 3, 4, 5, 6]
    assert page.records[1].state == 1 and page.records[1].body == b""
    assert [r.body for r in page.records[2:5]] == [b"m3", b"m4", b"m5"]
    assert await tier.state.trim_candidates(int(time.time() * 1000), 10) == [(0, CONV)]


async def test_a_position_bound_elsewhere_fails_closed(env):
    bootstrap, tier, producer = env
    await tier.state.position_bind("another-cluster|topic|1")
    archiver = HistoryArchiver(bootstrap, tier.state, tier.archive, 4, 30)
    await archiver.start()
    assert "position bound to another-cluster|topic|1" in archiver.not_ready()
    await archiver.run()  # returns at once: nothing archived
    assert await tier.state.position() == 0
    await archiver.close()


async def test_a_position_below_the_retained_log_start_fails_closed(env):
    bootstrap, tier, producer = env
    await produce(producer, [outbox(record(s)) for s in range(1, 4)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_records([TopicPartition(OUTBOX_TOPIC, 0, 2)]).values():
        fut.result(10)
    archiver = HistoryArchiver(bootstrap, tier.state, tier.archive, 4, 30)
    await archiver.start()
    assert "below the retained Outbox start 2" in archiver.not_ready()
    await archiver.close()


async def test_an_undecodable_record_stops_the_archiver_before_it(env):
    bootstrap, tier, producer = env
    await produce(producer, [outbox(record(1)), outbox(record(2))])
    archiver = HistoryArchiver(bootstrap, tier.state, tier.archive, 1, 30)  # one record per batch
    await running(archiver, lambda: _at(tier, 2))
    after = record(4)
    await produce(producer, [b"\xff\xfe not an outbox record", outbox(after)])
    archiver = HistoryArchiver(bootstrap, tier.state, tier.archive, 8, 30)
    await archiver.start()
    await archiver.run()  # returns once failed closed
    assert "outbox offsets 2..2" in archiver.stopped or "outbox offsets 2..3" in archiver.stopped
    assert await tier.state.position() == 2
    assert (await tier.archive.records(0, [after.message_id]))[0] is None
    await archiver.close()


async def _at(tier, offset: int) -> bool:
    return await tier.state.position() == offset
