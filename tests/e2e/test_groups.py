"""Groups, history paging, recall and delete end to end (docs/design.md §7, §12)."""

from __future__ import annotations

import os
import random
import subprocess
import sys

from qim._core import ids
from qim.errors import ErrorCode
from qim.proto.v1 import group_pb2, history_pb2, message_pb2
from qim.protocol import EventType, Opcode
from tests.e2e.rawclient import RawClient, call, wait_for_entries

CONTROL = 4


def users(n: int) -> list[int]:
    base = random.getrandbits(40) + 1
    return [base + i for i in range(n)]


def gconv(group_id: int) -> bytes:
    return ids.conversation_id_group(0, group_id)


async def create(client: RawClient, group_id: int, members: list[int], cmid: bytes | None = None):
    return await call(client, Opcode.CREATE_GROUP, group_pb2.CreateGroup(
        group_id=group_id, members=members, client_message_id=cmid or os.urandom(16)))


async def gsend(client: RawClient, group_id: int, body: bytes, **kw):
    return await call(client, Opcode.SEND_MESSAGE, message_pb2.SendMessage(
        client_message_id=os.urandom(16), conversation_id=gconv(group_id), message_type=kw.pop("message_type", 1),
        body=body, **kw))


async def history(client: RawClient, conv: bytes, peer: int = 0, anchor: int = 0, newer: bool = False, **kw):
    return await call(client, Opcode.PULL_HISTORY, history_pb2.PullHistory(
        conversation_id=conv, peer_user_id=peer, anchor_seq=anchor,
        direction=history_pb2.NEWER if newer else history_pb2.OLDER, **kw))


def qimctl(stack, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **stack.client_env()}  # the writer, the CA and qimctl's certificate (stack.env)
    return subprocess.run([sys.executable, "-m", "qim.cli.qimctl", *args], env=env, capture_output=True,
                          text=True, timeout=60)


def bodies(entries) -> list[bytes]:
    return [e.body for e in entries if e.message_type != CONTROL]


async def test_group_create_send_receive_online_and_offline(stack):
    a, b, c = users(3)
    gid = random.getrandbits(62) + 1
    ca, cb = await RawClient.login(stack, a), await RawClient.login(stack, b)
    op, ok = await create(ca, gid, [b, c])
    assert op == Opcode.GROUP_OK and ok.membership_version == 1 and ok.conversation_id == gconv(gid)
    op, ack = await gsend(ca, gid, b"hello group", message_type=42, custom_type=b"app.poll")
    assert op == Opcode.SEND_ACK and ack.conversation_seq == ok.conversation_seq + 1
    online = await wait_for_entries(cb, 2)
    assert online[0].message_type == CONTROL and online[0].event_type == EventType.MEMBERSHIP
    change = message_pb2.ControlEvent.FromString(online[0].body).membership
    assert change.kind == message_pb2.MembershipChange.CREATED and sorted(change.users) == sorted([a, b, c])
    cc = await RawClient.login(stack, c)  # offline until now
    offline = await wait_for_entries(cc, 2)
    assert bodies(offline) == [b"hello group"]
    assert offline[1].message_type == 42 and offline[1].custom_type == b"app.poll"  # custom type survives
    op, page = await call(cc, Opcode.PULL_MEMBERS, group_pb2.PullMembers(group_id=gid, limit=2))
    assert op == Opcode.MEMBERS_BATCH and [m.user_id for m in page.members] == sorted([a, b, c])[:2] and page.has_more
    op, rest = await call(cc, Opcode.PULL_MEMBERS, group_pb2.PullMembers(group_id=gid, after_user_id=page.members[-1].user_id))
    assert [m.user_id for m in rest.members] == sorted([a, b, c])[2:] and not rest.has_more
    assert [m.owner for m in list(page.members) + list(rest.members)] == [u == a for u in sorted([a, b, c])]


async def test_create_existing_group_is_conflict_and_retry_replays(stack):
    a, b = users(2)
    gid = random.getrandbits(62) + 1
    ca, cb = await RawClient.login(stack, a), await RawClient.login(stack, b)
    cmid = os.urandom(16)
    _, first = await create(ca, gid, [b], cmid)
    op, again = await create(ca, gid, [b], cmid)  # same request retried
    assert op == Opcode.GROUP_OK and again.conversation_seq == first.conversation_seq
    op, err = await create(cb, gid, [a])  # somebody else tries to take the group over
    assert op == Opcode.ERROR and err.code == ErrorCode.CONFLICT
    op, err = await create(ca, gid, [b])
    assert op == Opcode.ERROR and err.code == ErrorCode.CONFLICT


async def test_non_members_are_forbidden_never_an_empty_page(stack):
    a, stranger = users(2)
    gid = random.getrandbits(62) + 1
    ca, cs = await RawClient.login(stack, a), await RawClient.login(stack, stranger)
    await create(ca, gid, [])
    for op, err in (await call(cs, Opcode.PULL_MEMBERS, group_pb2.PullMembers(group_id=gid)),
                    await history(cs, gconv(gid)),
                    await gsend(cs, gid, b"let me in"),
                    await call(cs, Opcode.PULL_MEMBERS, group_pb2.PullMembers(group_id=gid + 1))):
        assert op == Opcode.ERROR and err.code == ErrorCode.FORBIDDEN
    op, err = await history(cs, ids.conversation_id_direct(0, a, a + 99), peer=a + 99)  # not its direct chat
    assert op == Opcode.ERROR and err.code == ErrorCode.FORBIDDEN


async def test_join_and_leave_boundaries(stack):
    a, b, c = users(3)
    gid = random.getrandbits(62) + 1
    ca, cb = await RawClient.login(stack, a), await RawClient.login(stack, b)
    await create(ca, gid, [b])
    await gsend(ca, gid, b"before join 1")
    await gsend(ca, gid, b"before join 2")
    added = qimctl(stack, "membership", "add", "--group", str(gid), "--user", str(c))
    assert added.returncode == 0, added.stdout + added.stderr
    await gsend(ca, gid, b"after join")
    op, left = await call(cb, Opcode.LEAVE_GROUP, group_pb2.LeaveGroup(group_id=gid, client_message_id=os.urandom(16)))
    assert op == Opcode.GROUP_OK
    await gsend(ca, gid, b"after leave")
    cc = await RawClient.login(stack, c)
    entries = await wait_for_entries(cc, 4)  # JOINED, after join, LEFT, after leave: no back-fill
    assert bodies(entries) == [b"after join", b"after leave"]
    op, page = await history(cc, gconv(gid))
    visible = [i.body for i in page.items if i.message_type != CONTROL]
    assert visible == [b"after leave", b"after join"]  # nothing from before joining
    op, page = await history(cb, gconv(gid))  # the leaver still reads everything before leaving
    assert [i.body for i in page.items if i.message_type != CONTROL] == [b"after join", b"before join 2", b"before join 1"]
    assert page.items[0].conversation_seq == left.conversation_seq  # its own LEFT message is the last
    b_entries = await wait_for_entries(cb, 5)
    assert b"after leave" not in bodies(b_entries)
    op, err = await gsend(cb, gid, b"still here?")
    assert op == Opcode.ERROR and err.code == ErrorCode.FORBIDDEN
    removed = qimctl(stack, "membership", "remove", "--group", str(gid), "--user", str(b))
    assert removed.returncode == 1 and "no membership change" in removed.stdout  # already gone


async def test_history_paging_both_ways_with_limit_and_byte_budget(stack):
    a, b = users(2)
    ca = await RawClient.login(stack, a)
    conv = ids.conversation_id_direct(0, a, b)
    for i in range(12):
        await ca.send_text(b, f"m{i:02d}".encode())
    got, anchor = [], 0
    while True:
        op, page = await history(ca, conv, peer=b, anchor=anchor, limit=5)
        assert op == Opcode.HISTORY_BATCH and len(page.items) <= 5
        got += [i.body for i in page.items]
        anchor = page.next_anchor
        if not page.has_more:
            break
    assert got == [f"m{i:02d}".encode() for i in reversed(range(12))]
    op, page = await history(ca, conv, peer=b, newer=True, limit=5)
    assert [i.body for i in page.items] == [f"m{i:02d}".encode() for i in range(5)] and page.has_more
    op, page = await history(ca, conv, peer=b, newer=True, anchor=page.next_anchor, limit=50)
    assert [i.body for i in page.items] == [f"m{i:02d}".encode() for i in range(5, 12)] and not page.has_more
    assert all(i.client_message_id for i in page.items)  # the actor's own messages carry their cmid
    big = [os.urandom(200_000) for _ in range(3)]
    for body in big:
        await ca.send_text(b, body)
    op, page = await history(ca, conv, peer=b, max_bytes=300_000)
    assert [i.body for i in page.items] == [big[2]] and page.has_more  # budget: the first item only
    op, page = await history(ca, conv, peer=b, anchor=page.next_anchor, max_bytes=10)
    assert [i.body for i in page.items] == [big[1]]  # the first item is always returned


async def test_recall_and_delete_reach_offline_members_and_bodies_are_gone(stack):
    a, b, c = users(3)
    ca = await RawClient.login(stack, a)
    conv = ids.conversation_id_direct(0, a, b)
    _, small = await ca.send_text(b, b"oops, wrong chat")
    _, large = await ca.send_text(b, os.urandom(9000))  # referenced, not inline
    _, keep = await ca.send_text(b, b"this one stays")
    for ack in (small, large):
        op, ok = await call(ca, Opcode.RECALL_MESSAGE, message_pb2.RecallMessage(
            conversation_id=conv, message_id=ack.message_id, client_message_id=os.urandom(16), peer_user_id=b))
        assert op == Opcode.RECALL_OK and ok.state == message_pb2.MESSAGE_STATE_RECALLED
    cb = await RawClient.login(stack, b)  # offline while it happened
    op, err = await call(cb, Opcode.RECALL_MESSAGE, message_pb2.RecallMessage(
        conversation_id=conv, message_id=keep.message_id, client_message_id=os.urandom(16), peer_user_id=a))
    assert op == Opcode.ERROR and err.code == ErrorCode.FORBIDDEN  # only the sender recalls
    entries = await wait_for_entries(cb, 5)
    by_id = {e.message_id: e for e in entries}
    for ack in (small, large):
        assert by_id[ack.message_id].body == b"" and by_id[ack.message_id].state == message_pb2.MESSAGE_STATE_RECALLED
    notices = [message_pb2.ControlEvent.FromString(e.body).state_change for e in entries if e.event_type == EventType.RECALL]
    assert sorted(n.message_id for n in notices) == sorted([small.message_id, large.message_id])
    assert by_id[keep.message_id].body == b"this one stays"
    op, page = await history(cb, conv, peer=a)
    states = {i.message_id: (i.state, i.body_included, i.body) for i in page.items}
    assert states[small.message_id] == (message_pb2.MESSAGE_STATE_RECALLED, False, b"")
    assert states[keep.message_id] == (message_pb2.MESSAGE_STATE_NORMAL, True, b"this one stays")
    # an operator deletes a group message; the offline member sees the DELETE and no body
    gid = random.getrandbits(62) + 1
    await create(ca, gid, [c])
    _, gm = await gsend(ca, gid, b"needs moderation")
    deleted = qimctl(stack, "message", "delete", "--conversation", gconv(gid).hex(), "--message-id", gm.message_id.hex())
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    cc = await RawClient.login(stack, c)
    entries = await wait_for_entries(cc, 3)
    assert [e.event_type for e in entries] == [EventType.MEMBERSHIP, EventType.MESSAGE, EventType.DELETE]
    assert entries[1].body == b"" and entries[1].state == message_pb2.MESSAGE_STATE_DELETED
    op, page = await history(cc, gconv(gid))
    assert [(i.state, i.body_included) for i in page.items if i.message_id == gm.message_id] == \
        [(message_pb2.MESSAGE_STATE_DELETED, False)]


def test_audit_counts_group_audiences_from_their_snapshots(stack, engines):
    env = {**os.environ, **engines.env()}
    proc = subprocess.run([sys.executable, "-m", "qim.cli.qimctl", "audit", "dispatch", "--timeout", "60"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "committed_without_dispatch=0 dispatch_without_commit=0 coordinate_mismatch=0 wrong_partition=0" in proc.stdout
