"""Session list with groups, recall and delete end to end (issue 7 proofs; docs/design.md §6,
§7): member intervals bound heads and unread, recalled/deleted messages stop counting
also for a member who was offline, and one member's reads never move another's."""

from __future__ import annotations

import os
import random

from qim._core import ids
from qim.proto.v1 import group_pb2, message_pb2
from qim.protocol import Opcode
from tests.e2e.rawclient import RawClient, call
from tests.e2e.sessionclient import entry_when, mark_read, new_user, sessions
from tests.e2e.test_groups import create, gconv, gsend, qimctl
from tests.e2e.test_sessions import send_n

CONTROL = 4


async def test_group_in_every_members_list_interval_bounded_unread_and_leaving(stack):
    a, b, c, d = (new_user() for _ in range(4))
    gid = random.getrandbits(62) + 1
    conv = gconv(gid)
    ca, cb, cc = [await RawClient.login(stack, u) for u in (a, b, c)]
    op, made = await create(ca, gid, [b, c])
    assert op == Opcode.GROUP_OK
    first = [(await gsend(ca, gid, b"g%d" % i))[1] for i in range(2)]
    for client in (cb, cc):  # every member lists it; the CREATED control message never counts
        e = await entry_when(client, conv, lambda e: e.unread == 2)
        assert (e.kind, e.group_id, e.joined_at, e.left_at, e.unread_exact) == (2, gid, 0, 0, True)
        assert e.last_message.body == b"g1" and e.peer_user_id == 0
    owner = await entry_when(ca, conv, lambda e: e.read_conversation_seq == first[-1].conversation_seq)
    assert owner.unread == 0 and owner.last_message.conversation_seq == first[-1].conversation_seq

    # C talks: A's unread is 1; B reading must not move A's (or C's) position
    _, from_c = await gsend(cc, gid, b"from c")
    await entry_when(ca, conv, lambda e: e.unread == 1)
    op, ok = await mark_read(cb, conv, from_c.conversation_seq)
    assert op == Opcode.MARK_READ_OK and ok.read_conversation_seq == from_c.conversation_seq
    assert (await entry_when(ca, conv, lambda e: True)).unread == 1
    assert (await entry_when(cb, conv, lambda e: True)).unread == 0

    # B leaves: what comes after left_at is invisible to B (head and unread)
    op, left = await call(cb, Opcode.LEAVE_GROUP, group_pb2.LeaveGroup(group_id=gid, client_message_id=os.urandom(16)))
    assert op == Opcode.GROUP_OK
    after = [(await gsend(ca, gid, b"after leave %d" % i))[1] for i in range(3)]
    e = await entry_when(cb, conv, lambda e: e.left_at == left.conversation_seq)
    assert e.unread == 0 and e.last_message.conversation_seq == left.conversation_seq
    assert e.last_message.message_type == CONTROL  # its own LEFT message is the last it sees
    op, ok = await mark_read(cb, conv, after[-1].conversation_seq)  # clamped to the interval
    assert op == Opcode.MARK_READ_OK and ok.read_conversation_seq == left.conversation_seq
    e = await entry_when(cc, conv, lambda e: e.last_message.conversation_seq == after[-1].conversation_seq)
    # C's own send marked everything up to it read; then A's 3 (the LEFT control never counts)
    assert e.unread == 3 and e.read_conversation_seq == from_c.conversation_seq

    # a member added later sees only what follows its joining
    added = qimctl(stack, "membership", "add", "--group", str(gid), "--user", str(d))
    assert added.returncode == 0, added.stdout + added.stderr
    _, last = await gsend(ca, gid, b"welcome")
    cd = await RawClient.login(stack, d)
    e = await entry_when(cd, conv, lambda e: e.last_message.conversation_seq == last.conversation_seq)
    assert e.joined_at == last.conversation_seq - 2 and e.unread == 1  # JOINED control + "welcome"
    assert e.joined_at > made.conversation_seq
    for client in (ca, cb, cc, cd):
        await client.close()


async def test_recalled_and_deleted_stop_counting_also_for_offline_recipients(stack):
    me, peer = new_user(), new_user()
    conv = ids.conversation_id_direct(0, me, peer)
    sender = await RawClient.login(stack, peer)
    acks = await send_n(sender, me, 4, b"r")

    async def recall(ack):
        op, ok = await call(sender, Opcode.RECALL_MESSAGE, message_pb2.RecallMessage(
            conversation_id=conv, message_id=ack.message_id, client_message_id=os.urandom(16), peer_user_id=me))
        assert op == Opcode.RECALL_OK, ok

    # online: the list is cached on the session node, then the recall arrives
    client = await RawClient.login(stack, me)
    await entry_when(client, conv, lambda e: e.unread == 4)
    await client.close()  # offline from here on
    await recall(acks[1])
    await recall(acks[3])
    client = await RawClient.login(stack, me, device=2)
    e = await entry_when(client, conv, lambda e: e.unread == 2)  # the recall notices never count either
    assert e.last_message.message_type == CONTROL  # the newest visible message: the last recall notice
    listed = [x for x in await sessions(client) if x.conversation_id == conv]
    assert listed[0].unread == 2 and listed[0].unread_exact

    # an operator deletes a group message while a member is offline
    other = new_user()
    gid = random.getrandbits(62) + 1
    await create(sender, gid, [other])
    msgs = [(await gsend(sender, gid, b"x%d" % i))[1] for i in range(3)]
    deleted = qimctl(stack, "message", "delete", "--conversation", gconv(gid).hex(), "--message-id",
                     msgs[0].message_id.hex())
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    member = await RawClient.login(stack, other)
    e = await entry_when(member, gconv(gid), lambda e: e.unread == 2)
    assert e.unread_exact
    await sender.close(), await client.close(), await member.close()
