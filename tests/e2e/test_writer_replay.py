"""Retried operations replay their original reply (server part;
docs/design.md §1 "a retried send is never delivered twice", §11 pending max age 24 h).

CREATE_GROUP, LEAVE_GROUP and RECALL_MESSAGE sent again with the same client_message_id
after a lost reply get the original GroupOk / RecallOk: the same membership_version and
conversation_seq, the same control_conversation_seq, also after the actor left the group
and for as long as an SDK retries a pending operation (the commit state is kept 24 h,
not the 2 h of a send).
"""

from __future__ import annotations

import os
import random

import redis.asyncio as aioredis

from qim._core import ids
from qim.consts import COMMIT_HELPER_TTL_MS
from qim.net.framed import parse_addr
from qim.proto.v1 import group_pb2, message_pb2
from qim.protocol import Opcode
from qim.stores.redis.keys import CommitKeys
from tests.e2e.rawclient import RawClient, call
from tests.e2e.test_groups import create, gconv, gsend, qimctl, users

DAY_MS = 24 * 3600 * 1000


async def ttl_ms(engines, conv: bytes, actor: int, cmid: bytes) -> int:
    host, port = parse_addr(engines.redis_addr)
    client = aioredis.Redis(host=host, port=port)
    try:
        return await client.pttl(CommitKeys(0, conv).commit(actor, cmid))
    finally:
        await client.aclose()


async def test_group_operations_and_recall_replay_the_original_reply(stack, engines):
    a, b, c = users(3)
    gid = random.getrandbits(62) + 1
    conv = gconv(gid)
    ca, cb = await RawClient.login(stack, a), await RawClient.login(stack, b)
    create_cmid, leave_cmid, recall_cmid = os.urandom(16), os.urandom(16), os.urandom(16)
    op, made = await create(ca, gid, [b, c], create_cmid)
    assert op == Opcode.GROUP_OK
    _, msg = await gsend(cb, gid, b"to be recalled")
    recall = message_pb2.RecallMessage(conversation_id=conv, message_id=msg.message_id, client_message_id=recall_cmid)
    op, recalled = await call(cb, Opcode.RECALL_MESSAGE, recall)
    assert op == Opcode.RECALL_OK and recalled.control_conversation_seq > msg.conversation_seq
    leave = group_pb2.LeaveGroup(group_id=gid, client_message_id=leave_cmid)
    op, left = await call(cb, Opcode.LEAVE_GROUP, leave)
    assert op == Opcode.GROUP_OK and left.membership_version == made.membership_version + 1
    added = qimctl(stack, "membership", "add", "--group", str(gid), "--user", str(b + 1000))
    assert added.returncode == 0, added.stdout + added.stderr  # the group moves on

    # the replies were "lost": the same requests again, after B left and the group moved on
    op, again = await call(cb, Opcode.RECALL_MESSAGE, recall)
    assert op == Opcode.RECALL_OK, again  # not FORBIDDEN although B is no member any more
    assert (again.control_conversation_seq, again.state) == (recalled.control_conversation_seq, recalled.state)
    op, again = await call(cb, Opcode.LEAVE_GROUP, leave)
    assert op == Opcode.GROUP_OK, again
    assert (again.membership_version, again.conversation_seq) == (left.membership_version, left.conversation_seq)
    op, again = await create(ca, gid, [b, c], create_cmid)
    assert op == Opcode.GROUP_OK, again
    assert (again.membership_version, again.conversation_seq) == (made.membership_version, made.conversation_seq)

    # the original answers stay replayable as long as an SDK retries a pending operation
    for actor, cmid in ((a, create_cmid), (b, leave_cmid), (b, recall_cmid)):
        assert await ttl_ms(engines, conv, actor, cmid) > DAY_MS - 60_000
    await ca.close(), await cb.close()


async def test_a_send_keeps_its_two_hour_dedup_window(stack, engines):
    a, b = users(2)
    client = await RawClient.login(stack, a)
    cmid = os.urandom(16)
    op, ack = await client.send_text(b, b"hello", cmid=cmid)
    assert op == Opcode.SEND_ACK
    ttl = await ttl_ms(engines, ids.conversation_id_direct(0, a, b), a, cmid)
    assert COMMIT_HELPER_TTL_MS - 60_000 < ttl <= COMMIT_HELPER_TTL_MS
    await client.close()
