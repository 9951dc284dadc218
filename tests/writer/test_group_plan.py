"""A group send plans from the group's version known to the writer (planner.py): the
reserve checks membership and version atomically, so a version that moved under the
writer (another writer changed the membership) costs one refused reserve and a fresh
read, never a wrong audience; a member who left is refused by the reserve itself."""

from __future__ import annotations

import os
import random

import pytest
from confluent_kafka import Consumer, TopicPartition

from qim._core import ids
from qim.config import Env, WriterConfig
from qim.consts import OUTBOX_TOPIC
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import group_pb2, internal_pb2, message_pb2
from qim.protocol import Opcode
from qim.services.writer.server import ConversationWriter
from tests.e2e.outboxread import outbox_end
from tests.writer.test_send_round_trips import RoundTrips, actor


def outbox_audiences(bootstrap: str, start: int, conversation_id: bytes, count: int) -> list:
    """The OutboxRecords (audience and record) of `conversation_id` from offset `start`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-" + os.urandom(4).hex(),
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(OUTBOX_TOPIC, 0, start)])
    out: list = []
    try:
        for _ in range(60):
            for m in consumer.consume(500, 0.5):
                if m.error() is None:
                    rec = internal_pb2.OutboxRecord.FromString(m.value())
                    if rec.record.conversation_id == conversation_id:
                        out.append(rec)
            if len(out) >= count:
                break
    finally:
        consumer.close()
    return out


async def test_a_membership_moved_by_another_writer_is_planned_again_and_a_leaver_refused(
        engines, private_redis, private_kafka, monkeypatch):
    # a Kafka of its own: these group records name snapshots only in private_redis, and the
    # session stack's fanout reading the shared Outbox would stop on them (fail closed)
    env = {**engines.env(), "QIM_REDIS_ADDR": private_redis.addr, "QIM_KAFKA_BOOTSTRAP": private_kafka.addr,
           "QIM_WRITER_LISTEN": "127.0.0.1:1", "QIM_INTERNAL_PLAINTEXT_DEV": "1"}
    writer, other = (ConversationWriter(WriterConfig.from_env(Env(env))) for _ in range(2))
    await writer.clock.start()
    await other.clock.start()
    a, b, c = (random.getrandbits(40) + 10 for _ in range(3))
    gid = random.getrandbits(40) + 1
    conv = ids.conversation_id_group(0, gid)

    async def send(w: ConversationWriter, user: int, body: bytes) -> message_pb2.SendAck:
        msg = message_pb2.SendMessage(client_message_id=os.urandom(16), conversation_id=conv, message_type=1, body=body)
        op, reply = await w.ops.client(actor(user), Opcode.SEND_MESSAGE, msg.SerializeToString())
        assert op == Opcode.SEND_ACK
        return message_pb2.SendAck.FromString(reply)

    try:
        create = group_pb2.CreateGroup(group_id=gid, members=[b], client_message_id=os.urandom(16))
        await writer.ops.client(actor(a), Opcode.CREATE_GROUP, create.SerializeToString())  # version 1
        start = outbox_end(private_kafka.addr)
        await send(writer, a, b"v1, read")
        trips = RoundTrips(writer.stores.client, monkeypatch)
        await send(writer, a, b"v1, known")
        assert trips.count == 2  # reserve + mark_committed: nothing read on the ACK path
        edit = internal_pb2.AdminRequest(tenant_id=bytes(16), membership=internal_pb2.MembershipEdit(
            group_id=gid, add=[c], request_id=os.urandom(16)))
        await other.ops.admin(edit)  # version 2, written by another writer
        await send(writer, a, b"v2, planned again")
        leave = group_pb2.LeaveGroup(group_id=gid, client_message_id=os.urandom(16))
        await other.ops.client(actor(b), Opcode.LEAVE_GROUP, leave.SerializeToString())  # version 3
        with pytest.raises(RequestError) as refused:
            await send(writer, b, b"from a member who left")
        assert refused.value.code == ErrorCode.FORBIDDEN
        await send(writer, c, b"v3")
        records = outbox_audiences(private_kafka.addr, start, conv, 6)
        sent = [(r.record.body, r.membership_version) for r in records if r.record.message_type == 1]
        assert sent == [(b"v1, read", 1), (b"v1, known", 1), (b"v2, planned again", 2), (b"v3", 3)]
    finally:
        for w in (writer, other):
            await w.producer.close()
            await w.stores.close()
