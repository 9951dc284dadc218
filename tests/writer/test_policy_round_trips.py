"""What the send policy's kept refusals cost and where they hold (docs/decisions/0099,
Amendment), on real Redis and Kafka with two writer processes' worth of state (two
ConversationWriters over one Redis, a failover): an accepted send with a policy
configured is still one reserving call and one mark_committed (the reserve reads the
kept refusal itself); a refusal is one call (policy_refuse.lua); and a retry of a
refused send through the other writer, whose policy now holds it and then accepts it, is
refused with the first reason (the accepted one in its reserving call), nothing committed."""

from __future__ import annotations

import os
import random

from qim._core import ids
from qim.config import Env, WriterConfig
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import message_pb2
from qim.protocol import Opcode
from qim.services.writer.server import ConversationWriter
from tests.writer.test_send_round_trips import RoundTrips, actor, evalsha_calls


async def test_policy_sends_cost_no_extra_round_trip_and_a_refusal_survives_a_failover(
        engines, private_redis, monkeypatch, tmp_path):
    switch = tmp_path / "verdict"
    switch.write_text("accept")
    monkeypatch.setenv("POLICY_SWITCH_FILE", str(switch))
    env = {**engines.env(), "QIM_REDIS_ADDR": private_redis.addr, "QIM_WRITER_LISTEN": "127.0.0.1:1",
           "QIM_INTERNAL_PLAINTEXT_DEV": "1", "QIM_SEND_POLICY": "tests.policy.switch:by_switch"}
    first = ConversationWriter(WriterConfig.from_env(Env(env)))
    a, b = random.getrandbits(40) + 10, random.getrandbits(40) + 10
    conv = ids.conversation_id_direct(0, a, b)

    async def send(writer: ConversationWriter, body: bytes, cmid: bytes = b"") -> tuple[int, bytes]:
        msg = message_pb2.SendMessage(client_message_id=cmid or os.urandom(16), conversation_id=conv,
                                      recipient_user_id=b, message_type=1, body=body)
        try:
            return await writer.ops.client(actor(a), Opcode.SEND_MESSAGE, msg.SerializeToString())
        except RequestError as exc:  # the RPC server's ERROR frame: (code, message)
            return exc.code, exc.message.encode()

    redis = private_redis.client()
    writers = [first]
    try:
        await first.clock.start()
        assert (await send(first, b"warm"))[0] == Opcode.SEND_ACK  # scripts loaded
        trips = RoundTrips(first.stores.client, monkeypatch)
        redis.config_resetstat()
        for _ in range(5):
            op, reply = await send(first, b"switch accepted")
            assert op == Opcode.SEND_ACK, reply
        assert (trips.count, evalsha_calls(redis)) == (10, 10)  # reserve_and_record + mark_committed
        switch.write_text("refuse:not from this account")
        assert (await send(first, b"switch warm"))[0] == ErrorCode.POLICY_REFUSED  # policy_refuse.lua loaded
        cmid = os.urandom(16)
        trips.count = 0
        assert await send(first, b"switch refused", cmid) == (ErrorCode.POLICY_REFUSED,
                                                              b"not from this account")
        assert trips.count == 1  # policy_refuse.lua (it also keeps an earlier acceptance)
        held = os.urandom(16)
        assert await send(first, b"switch held later", held) == (ErrorCode.POLICY_REFUSED,
                                                                 b"not from this account")
        await first.producer.close()
        await first.stores.close()
        writers.clear()
        # the policy changed its mind (accepts, or holds); another writer process (a
        # failover) answers the retries
        switch.write_text("accept")
        second = ConversationWriter(WriterConfig.from_env(Env({**env, "QIM_WRITER_ID": "1"})))
        writers.append(second)
        await second.clock.start()
        trips = RoundTrips(second.stores.client, monkeypatch)
        assert await send(second, b"switch refused", cmid) == (ErrorCode.POLICY_REFUSED,
                                                               b"not from this account")
        assert trips.count == 1  # the reserving call read the kept refusal and reserved nothing
        switch.write_text("hold")
        assert await send(second, b"switch held later", held) == (ErrorCode.POLICY_REFUSED,
                                                                  b"not from this account")
        switch.write_text("accept")
        assert await send(second, b"switch refused otherwise", cmid) == (
            ErrorCode.CONFLICT, b"client_message_id reused with other content")
        assert (await send(second, b"switch refused"))[0] == Opcode.SEND_ACK  # a new cmid is accepted
    finally:
        redis.close()
        for writer in writers:
            await writer.producer.close()
            await writer.stores.close()
