"""What a send costs the commit store (docs/design.md §5.2; issue 11 "a send costs one Redis
round trip fewer" and "round trips per send must not grow"): a direct send is exactly
one reserving call and one mark_committed (no read-back of what the writer just wrote),
and so is a group send once the writer knows the group's version (the first send to a
group reads it)."""

from __future__ import annotations

import asyncio
import os
import random

from redis.asyncio.client import Pipeline

from qim._core import ids
from qim.config import Env, WriterConfig
from qim.infra.redis.pipe import PipelinedRedis
from qim.proto.v1 import group_pb2, internal_pb2, message_pb2
from qim.protocol import Opcode
from qim.services.writer.server import ConversationWriter


def actor(user: int) -> internal_pb2.Actor:
    return internal_pb2.Actor(tenant_id=bytes(16), user_id=user, device_id=1)


class RoundTrips:
    """Counts the writer's round trips to Redis on the client side: one per command sent
    alone, one per pipeline executed, on redis-py or on the lean connection of the
    script calls (qim/infra/redis/pipe.py; script-internal commands are not round trips)."""

    def __init__(self, client, monkeypatch) -> None:
        self.count = 0
        single = client.execute_command

        async def counted_command(*args, **kw):
            self.count += 1
            return await single(*args, **kw)

        run = Pipeline.execute

        async def counted_pipeline(pipe, *args, **kw):
            self.count += 1
            return await run(pipe, *args, **kw)

        lean = PipelinedRedis.execute

        async def counted_lean(pipe, *args, **kw):
            self.count += 1
            return await lean(pipe, *args, **kw)

        monkeypatch.setattr(client, "execute_command", counted_command)
        monkeypatch.setattr(Pipeline, "execute", counted_pipeline)
        monkeypatch.setattr(PipelinedRedis, "execute", counted_lean)


def evalsha_calls(client) -> int:
    """EVALSHA calls since the last CONFIG RESETSTAT (scripts cannot call EVALSHA)."""
    return client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)


async def test_sends_cost_one_reserve_and_one_commit(engines, private_redis, private_kafka, monkeypatch):
    # a Kafka of its own: its group records name a snapshot only in private_redis, and the
    # session stack's fanout reading the shared Outbox stopped on them (fail closed)
    env = {**engines.env(), "QIM_REDIS_ADDR": private_redis.addr, "QIM_KAFKA_BOOTSTRAP": private_kafka.addr,
           "QIM_WRITER_LISTEN": "127.0.0.1:1", "QIM_INTERNAL_PLAINTEXT_DEV": "1"}
    writer = ConversationWriter(WriterConfig.from_env(Env(env)))
    await writer.clock.start()
    a, b = random.getrandbits(40) + 10, random.getrandbits(40) + 10
    conv = ids.conversation_id_direct(0, a, b)
    gid = random.getrandbits(40) + 1
    gconv = ids.conversation_id_group(0, gid)

    async def send(conversation: bytes, **kw) -> None:
        msg = message_pb2.SendMessage(client_message_id=os.urandom(16), conversation_id=conversation,
                                      message_type=1, body=b"hi", **kw)
        op, _ = await writer.ops.client(actor(a), Opcode.SEND_MESSAGE, msg.SerializeToString())
        assert op == Opcode.SEND_ACK

    create = group_pb2.CreateGroup(group_id=gid, members=[b], client_message_id=os.urandom(16))
    await writer.ops.client(actor(a), Opcode.CREATE_GROUP, create.SerializeToString())
    await send(conv, recipient_user_id=b)  # warm: scripts loaded
    await send(gconv)
    redis = private_redis.client()
    trips = RoundTrips(writer.stores.client, monkeypatch)
    try:
        redis.config_resetstat()
        for _ in range(5):
            await send(conv, recipient_user_id=b)
        assert (trips.count, evalsha_calls(redis)) == (10, 10)  # reserve_and_record + mark_committed
        trips.count = 0
        redis.config_resetstat()
        for _ in range(5):
            await send(gconv)
        # the same: the group's version and member count are known to the writer
        # (qim/services/writer/planner.py; the reserve checks them), nothing is read
        assert (trips.count, evalsha_calls(redis)) == (10, 10)
    finally:
        redis.close()
        await writer.producer.close()
        await writer.stores.close()


async def test_concurrent_sends_share_round_trips(engines, private_redis, monkeypatch):
    """Group commit: the reserves and the mark_committeds of sends that arrive
    together travel in shared pipelines, not one round trip each (before: 2 per send), and
    every send still gets its own ACK with its own conversation_seq."""
    env = {**engines.env(), "QIM_REDIS_ADDR": private_redis.addr, "QIM_WRITER_LISTEN": "127.0.0.1:1",
           "QIM_INTERNAL_PLAINTEXT_DEV": "1"}
    writer = ConversationWriter(WriterConfig.from_env(Env(env)))
    await writer.clock.start()
    a = random.getrandbits(40) + 10
    peers = [random.getrandbits(40) + 10 for _ in range(20)]

    async def send(peer: int) -> message_pb2.SendAck:
        msg = message_pb2.SendMessage(client_message_id=os.urandom(16), conversation_id=ids.conversation_id_direct(
            0, a, peer), recipient_user_id=peer, message_type=1, body=b"hi")
        op, reply = await writer.ops.client(actor(a), Opcode.SEND_MESSAGE, msg.SerializeToString())
        assert op == Opcode.SEND_ACK
        return message_pb2.SendAck.FromString(reply)

    try:
        await send(peers[0])  # warm: scripts loaded, producer connected
        trips = RoundTrips(writer.stores.client, monkeypatch)
        acks = await asyncio.gather(*(send(p) for p in peers[1:]))
        assert len({ack.message_id for ack in acks}) == len(acks)
        assert all(ack.conversation_seq >= 1 for ack in acks)
        # 19 sends: 38 round trips one call at a time; shared pipelines need a handful
        assert trips.count <= 8, trips.count
    finally:
        await writer.producer.close()
        await writer.stores.close()
