"""Replies, mentions and edits end to end (issue 37; docs/decisions/0120) on the real stack,
through qim.sdk and at the frame level: what each app is told.

- a reply carries the server's quoted preview; a reply to a recalled message is told as
  recalled, with no preview;
- a mention retried under the same client_message_id with another target is CONFLICT
  (reply target and mentions are part of the send's identity), the same retry is the
  same SEND_ACK; mention_all in a group above 20 members is the owner's only;
- an edit reaches both devices of the recipient and the sender's other device as
  MessagesUpdated (latest body, edited, version), and history gives the latest body;
  a recall of the edited message removes every version (the edit notices too);
- an older client (a raw one that knows none of the new fields) keeps working.
"""

from __future__ import annotations

import os

from qim.consts import MESSAGE_TYPE_CONTROL
from qim.proto.v1 import common_pb2, history_pb2, message_pb2
from qim.protocol import EventType, Opcode
from qim.sdk import events as ev
from qim.sdk.requests import pull_history
from qim.wire.control import control_event
from tests.e2e.rawclient import RawClient, wait_for_entries
from tests.e2e.sdkclient import client, close_all
from tests.sdk.realstack import eventually, users

RECALLED = message_pb2.MESSAGE_STATE_RECALLED


async def _row(c, message_id: bytes):
    rows = await c.store.run(c.store.messages, None)
    return next((m for m in rows if m.message_id == message_id), None)


def _updates(c, message_id: bytes) -> list:
    return [m for e in c.told.events if isinstance(e, ev.MessagesUpdated) for m in e.messages
            if m.message_id == message_id]


async def test_reply_carries_the_servers_preview_and_a_reply_to_a_recalled_message_shows_recalled(stack, tmp_path):
    a, b = users(2)
    ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
    await ca.connect()
    await cb.connect()
    conv = (await ca.open_direct(b)).conversation_id
    first = await ca.send_text(conv, "你好 — a question about the release that is longer than eighty characters, surely")
    gone = await ca.send_text(conv, "this one will be recalled")
    await eventually(lambda: len(cb.told.messages(conv)) >= 2, what="b has both messages")
    await cb.open_direct(a)
    reply = await cb.send(conv, "yes".encode(), reply_to=first.message_id, mentions=[a])
    await ca.recall(conv, gone.message_id)
    late = await cb.send(conv, b"too late", reply_to=gone.message_id)
    await eventually(lambda: {reply.message_id, late.message_id} <= {m.message_id for m in ca.told.messages(conv)},
                     what="a told both replies")
    told = {m.message_id: m for m in ca.told.messages(conv)}
    got = told[reply.message_id]
    assert got.reply is not None and got.reply.message_id == first.message_id
    assert got.reply.conversation_seq == first.conversation_seq and got.reply.sender_id == a
    assert got.reply.preview == "你好 — a question about the release that is longer than eighty characters, surely"[:80]
    assert got.mentions == (a,) and not got.mention_all and not got.edited
    recalled = told[late.message_id].reply
    assert recalled.message_id == gone.message_id and recalled.state == RECALLED and recalled.preview == ""
    # history gives the same (a device that rebuilds from history)
    batch = await pull_history(ca.runtime, conv, b, anchor_seq=0, newer=True, limit=50)
    item = next(i for i in batch.items if i.message_id == reply.message_id)
    assert item.reply.preview == got.reply.preview and list(item.mention_user_ids) == [a]
    # a reply to a message of another conversation is NOT_FOUND, nothing is stored
    other = (await cb.open_direct(users(1)[0])).conversation_id
    try:
        await cb.send(other, b"x", reply_to=first.message_id)
        raise AssertionError("a reply across conversations was accepted")
    except ev.ServerError as exc:
        assert exc.code == common_pb2.NOT_FOUND
    await close_all(ca, cb)


async def test_a_mention_retried_with_another_target_is_conflict_and_an_older_client_keeps_working(stack):
    a, b, c = users(3)
    raw = await RawClient.login(stack, a)
    old = await RawClient.login(stack, b)  # "older client": parses with the fields it knows, below
    cmid = os.urandom(16)
    op, ack = await raw.send_text(b, b"hi @b", cmid=cmid, mention_user_ids=[b])
    assert op == Opcode.SEND_ACK, ack
    op, again = await raw.send_text(b, b"hi @b", cmid=cmid, mention_user_ids=[b])  # the same retry: same answer
    assert op == Opcode.SEND_ACK and again.message_id == ack.message_id
    op, err = await raw.send_text(b, b"hi @b", cmid=cmid, mention_user_ids=[c])
    assert op == Opcode.ERROR and err.code == common_pb2.CONFLICT, err
    op, err = await raw.send_text(b, b"hi @b", cmid=cmid, mention_user_ids=[b], reply_to_message_id=ack.message_id)
    assert op == Opcode.ERROR and err.code == common_pb2.CONFLICT, err
    op, err = await raw.send_text(b, b"hi @b", cmid=cmid)  # no mention at all: other content too
    assert op == Opcode.ERROR and err.code == common_pb2.CONFLICT, err
    # the recipient's entry carries the mention; a parser of the old schema (fields 1-13)
    # reads the same entry and simply does not see it
    entries = await wait_for_entries(old, 1)
    (entry,) = [e for e in entries if e.message_id == ack.message_id]
    assert list(entry.mention_user_ids) == [b] and entry.body == b"hi @b"
    legacy = _legacy_entry(entry.SerializeToString())
    assert legacy.body == b"hi @b" and legacy.conversation_seq == ack.conversation_seq
    await raw.close()
    await old.close()


def _legacy_entry(data: bytes):
    """A MailboxEntry as an older client parses it: a message type with fields 1-13 only
    (built at run time from the current descriptor minus the new fields)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    from qim.proto.v1 import mailbox_pb2

    fd = descriptor_pb2.FileDescriptorProto()
    mailbox_pb2.DESCRIPTOR.CopyToProto(fd)
    fd.name, fd.package = "legacy/mailbox.proto", "legacy"
    (msg,) = [m for m in fd.message_type if m.name == "MailboxEntry"]
    keep = [f for f in msg.field if f.number <= 13]
    del msg.field[:]
    msg.field.extend(keep)
    for f in msg.field:
        if f.type_name.startswith(".qim.v1."):
            f.ClearField("type_name")
            f.type = f.TYPE_INT32  # enums read as plain ints
    del fd.message_type[:]
    fd.message_type.append(msg)
    del fd.dependency[:]
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("legacy.MailboxEntry"))
    return cls.FromString(data)


async def test_mention_all_in_a_large_group_is_the_owners_only(stack, tmp_path):
    owner, member, *rest = users(23)
    co, cm = await client(stack, tmp_path, owner), await client(stack, tmp_path, member)
    await co.connect()
    await cm.connect()
    group = await co.create_group([member, *rest])
    await eventually(lambda: cm.told.messages(group.conversation_id) or True, what="member knows the group")
    try:
        await cm.send(group.conversation_id, b"@all", mention_all=True)
        raise AssertionError("a plain member mentioned all in a group of 23")
    except ev.ServerError as exc:
        assert exc.code == common_pb2.FORBIDDEN
    ack = await co.send(group.conversation_id, b"@all meeting", mention_all=True)
    await eventually(lambda: any(m.message_id == ack.message_id and m.mention_all
                                 for m in cm.told.messages(group.conversation_id)), what="member told @all")
    await close_all(co, cm)


async def test_an_edit_reaches_every_device_and_history_and_a_recall_removes_every_version(stack, tmp_path):
    a, b = users(2)
    ca1, ca2 = await client(stack, tmp_path, a, 1), await client(stack, tmp_path, a, 2)
    cb1, cb2 = await client(stack, tmp_path, b, 1), await client(stack, tmp_path, b, 2)
    for c in (ca1, ca2, cb1, cb2):
        await c.connect()
    conv = (await ca1.open_direct(b)).conversation_id
    sent = await ca1.send_text(conv, "teh first version")
    await eventually(lambda: all(any(m.message_id == sent.message_id for m in c.told.messages(conv))
                                 for c in (ca2, cb1, cb2)), what="three other devices told the message")
    done = await ca1.edit(conv, sent.message_id, "the first version")
    assert done.version == 1 and done.control_conversation_seq > sent.conversation_seq
    second = await ca1.edit(conv, sent.message_id, "the second version")
    assert second.version == 2
    for c in (ca1, ca2, cb1, cb2):
        await eventually(lambda c=c: any(m.version == 2 for m in _updates(c, sent.message_id)),
                         what="every device told the latest version")
        row = await _row(c, sent.message_id)
        assert row.body == b"the second version" and row.edited and row.version == 2
    batch = await pull_history(cb1.runtime, conv, a, anchor_seq=0, newer=True, limit=50)
    (item,) = [i for i in batch.items if i.message_id == sent.message_id]
    assert item.body == b"the second version" and item.version == 2 and item.edited_at_ms >= sent.created_at_ms
    notices = [i for i in batch.items if i.message_type == MESSAGE_TYPE_CONTROL
               and control_event(i.body).WhichOneof("event") == "edit"]
    assert [control_event(i.body).edit.body for i in notices] == [b"the first version", b"the second version"]
    # a device that comes later (no mailbox history of the edits) reads the latest version
    late = await client(stack, tmp_path, b, 3)
    await late.connect()
    page = await late.messages(conv, limit=10)
    assert [m.body for m in page if m.message_id == sent.message_id] == [b"the second version"]
    # only the sender edits
    try:
        await cb1.edit(conv, sent.message_id, "mine now")
        raise AssertionError("the recipient edited the sender's message")
    except ev.ServerError as exc:
        assert exc.code == common_pb2.FORBIDDEN
    # the recall removes every version: the message and both edit notices lose their bodies
    await ca1.recall(conv, sent.message_id)
    for c in (ca2, cb1, cb2):
        await eventually(lambda c=c: any(m.state == RECALLED for m in _updates(c, sent.message_id)),
                         what="every device told the recall")
        row = await _row(c, sent.message_id)
        assert row.body == b"" and not row.edited
    after = await pull_history(cb1.runtime, conv, a, anchor_seq=0, newer=True, limit=50)
    bodies = b"".join(i.body for i in after.items)
    assert b"version" not in bodies, "a version of the recalled message is still served"
    assert all(not i.body_included for i in after.items if i.message_id in {n.message_id for n in notices})
    await close_all(ca1, ca2, cb1, cb2, late)


def test_protocol_numbers_are_the_reserved_ones():
    """EDIT_MESSAGE/EDIT_OK and the CONTROL event kind are the numbers docs/protocol.md lists."""
    assert (Opcode.EDIT_MESSAGE, Opcode.EDIT_OK, EventType.EDIT) == (0x0205, 0x0206, 5)
    assert history_pb2.HistoryItem.DESCRIPTOR.fields_by_name["version"].number == 14
