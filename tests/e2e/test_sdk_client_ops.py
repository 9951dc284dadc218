"""qim.sdk.Client operations against the real stack: messages local first
with history back-fill, groups, recall, custom types, device identity, kick."""

from __future__ import annotations

from qim.consts import MESSAGE_TYPE_CUSTOM
from qim.proto.v1 import message_pb2
from qim.sdk import events as ev
from qim.sdk.identity import device_identity
from tests.e2e.sdkclient import client, close_all
from tests.sdk.realstack import eventually, users

RECALLED = message_pb2.MESSAGE_STATE_RECALLED


async def test_scrolling_back_beyond_the_store_backfills_history_with_states(stack, tmp_path):
    a, b = users(2)
    ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
    await ca.connect()
    conv = (await ca.open_direct(b)).conversation_id
    acks = [await ca.send_text(conv, f"行 {i:02d}") for i in range(30)]
    await ca.recall(conv, acks[3].message_id)
    await cb.connect()
    await eventually(lambda: len(cb.told.messages(conv)) >= 30, what="30 messages")
    # the oldest 20 are no longer in the store (as after a mailbox trim or a new install)
    cb.store._db.execute("DELETE FROM messages WHERE conversation_id = ? AND conversation_seq <= ?",
                         (conv, acks[19].conversation_seq))
    newest = await cb.messages(conv, limit=10)
    assert [m.body for m in newest] == [f"行 {i:02d}".encode() for i in range(20, 30)]
    older = await cb.messages(conv, before_seq=newest[0].conversation_seq, limit=15)
    assert [m.conversation_seq for m in older] == [x.conversation_seq for x in acks[5:20]]
    oldest = await cb.messages(conv, before_seq=older[0].conversation_seq, limit=15)
    assert [m.message_id for m in oldest] == [x.message_id for x in acks[:5]]
    assert oldest[3].state == RECALLED and oldest[3].body == b""
    assert all(m.body for i, m in enumerate(oldest) if i != 3)  # never an empty NORMAL body
    assert await cb.store.run(cb.store.oldest_reached, conv)
    assert len(await cb.store.run(cb.store.messages, conv)) == 30  # stored with their states
    await close_all(ca, cb)


async def test_groups_create_send_members_leave_and_custom_types(stack, tmp_path):
    a, b, c = users(3)
    ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
    await ca.connect()
    await cb.connect()
    group = await ca.create_group([b, c])
    assert group.is_group and group.is_member and group.group_id
    await ca.send_custom(group.conversation_id, "demo.card", b'{"title": "\xe5\x8d\xa1"}')
    await eventually(lambda: cb.told.messages(group.conversation_id), what="group message on b")
    (msg,) = cb.told.messages(group.conversation_id)
    assert msg.message_type == MESSAGE_TYPE_CUSTOM and msg.custom_type == b"demo.card"
    entry = await cb.conversation(group.conversation_id)
    assert entry.group_id == group.group_id and entry.unread == 1 and entry.unread_exact
    assert any(isinstance(e, ev.MembershipChanged) and b in e.change.users for e in cb.told.events)
    members = await cb.members(group.group_id)
    assert sorted(m.user_id for m in members) == sorted([a, b, c])
    assert [m.user_id for m in members if m.owner] == [a]
    left = await cb.leave_group(group.group_id)
    assert not left.is_member and left.left_at > 0
    await ca.send_text(group.conversation_id, "after b left")
    assert sorted(m.user_id for m in await ca.members(group.group_id)) == sorted([a, c])
    await close_all(ca, cb)


async def test_two_stores_of_one_device_never_collide_on_client_message_id(stack, tmp_path):
    a, b = users(2)
    first = await client(stack, tmp_path, a, 7, name="-install1")
    await first.connect()
    conv = (await first.open_direct(b)).conversation_id
    old = [await first.send_text(conv, "same text") for _ in range(3)]
    await close_all(first)
    second = await client(stack, tmp_path, a, 7, name="-install2")  # same device, empty new store
    await second.connect()
    await second.open_direct(b)
    new = [await second.send_text(conv, "same text") for _ in range(3)]
    assert not {x.client_message_id for x in old} & {x.client_message_id for x in new}
    assert not {x.message_id for x in old} & {x.message_id for x in new}  # sent, not replayed
    await close_all(second)


async def test_device_identity_is_kept_with_the_store(tmp_path):
    first = await device_identity("127.0.0.1:7000", 0, 42, str(tmp_path))
    again = await device_identity("127.0.0.1:7000", 0, 42, str(tmp_path))
    assert first == again and 0 < first.device_id < 1 << 63
    other_endpoint = await device_identity("127.0.0.1:7001", 0, 42, str(tmp_path))
    assert other_endpoint.store_path != first.store_path


async def test_a_second_login_of_the_device_kicks_the_first(stack, tmp_path):
    (a,) = users(1)
    c1 = await client(stack, tmp_path, a, 3)
    await c1.connect()
    c2 = await client(stack, tmp_path, a, 3, name="-second")
    await c2.connect()
    await eventually(lambda: c1.state == "kicked", what="first client kicked")
    assert c1.told.of(ev.KickedEvent) and c1.told.of(ev.ConnectionState)[-1].state == "kicked"
    assert c2.state == "ready"
    await close_all(c1, c2)
