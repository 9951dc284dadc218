"""Member intervals in the writer against the real engines (docs/design.md §7; qim/stores/
intervals.py): a user removed and re-added many times keeps its last
MEMBER_INTERVALS_MAX intervals; history shows exactly the messages inside them."""

from __future__ import annotations

import asyncio
import os
import random

from qim._core import ids
from qim.config import Env, WriterConfig
from qim.consts import MEMBER_INTERVALS_MAX, MESSAGE_TYPE_CONTROL
from qim.proto.v1 import group_pb2, history_pb2, internal_pb2, message_pb2
from qim.protocol import Opcode
from qim.services.writer.server import ConversationWriter

OWNER = 7


def actor(user: int) -> internal_pb2.Actor:
    return internal_pb2.Actor(tenant_id=bytes(16), user_id=user, device_id=1)


async def test_a_member_keeps_its_last_intervals_and_sees_exactly_them(engines):
    writer = ConversationWriter(WriterConfig.from_env(Env({**engines.env(), "QIM_WRITER_LISTEN": "127.0.0.1:1",
                                                           "QIM_INTERNAL_PLAINTEXT_DEV": "1"})))
    await writer.clock.start()
    maintain = asyncio.get_running_loop().create_task(writer.clock.maintain())  # publishes the HLC ceiling
    gid = random.getrandbits(62) + 1
    conv = ids.conversation_id_group(0, gid)
    user = random.getrandbits(40) + 100

    async def client(who: int, opcode: int, msg) -> object:
        op, body = await writer.ops.client(actor(who), opcode, msg.SerializeToString())
        return body

    async def admin(**edit) -> None:
        req = internal_pb2.AdminRequest(tenant_id=bytes(16), membership=internal_pb2.MembershipEdit(
            group_id=gid, request_id=os.urandom(16), **edit))
        op, _ = await writer.ops.admin(req)
        assert op == Opcode.GROUP_OK

    async def say(body: bytes) -> int:
        ack = message_pb2.SendAck.FromString(await client(OWNER, Opcode.SEND_MESSAGE, message_pb2.SendMessage(
            client_message_id=os.urandom(16), conversation_id=conv, message_type=1, body=body)))
        return ack.conversation_seq

    await client(OWNER, Opcode.CREATE_GROUP, group_pb2.CreateGroup(group_id=gid, members=[user],
                                                                   client_message_id=os.urandom(16)))
    periods = MEMBER_INTERVALS_MAX + 2
    for p in range(periods):
        if p:
            await admin(add=[user])
        await say(b"period %d" % p)
        await admin(remove=[user])
        await say(b"gap %d" % p)
    intervals = await writer.stores.groups.intervals_of(0, conv, user)
    assert len(intervals) == MEMBER_INTERVALS_MAX and intervals[-1][1] is not None  # removed at the end
    page = history_pb2.HistoryBatch.FromString(await client(user, Opcode.PULL_HISTORY, history_pb2.PullHistory(
        conversation_id=conv, direction=history_pb2.NEWER, limit=200)))
    bodies = [i.body for i in page.items if i.message_type != MESSAGE_TYPE_CONTROL]
    assert bodies == [b"period %d" % p for p in range(periods - MEMBER_INTERVALS_MAX, periods)]  # oldest dropped
    maintain.cancel()
    await writer.producer.close()
    await writer.stores.close()
