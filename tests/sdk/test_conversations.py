"""The LocalStore's conversation list (qim/sdk/conversations.py): unread by the one
definition of docs/design.md §6 with the server's exact window, server snapshots, read
positions and member intervals, on a real SQLite store (pure logic, no server)."""

from __future__ import annotations

import pytest

from qim._core import ids
from qim.proto.v1 import history_pb2, mailbox_pb2, message_pb2, session_pb2
from qim.sdk.schema import SCHEMA_VERSION
from qim.sdk.store import LocalStore

TENANT, ME, PEER, GID = 7, 1001, 2002, 55
CONV = ids.conversation_id_direct(TENANT, ME, PEER)
GROUP = ids.conversation_id_group(TENANT, GID)
Kind = message_pb2.MembershipChange


def mid(n: int) -> bytes:
    return n.to_bytes(16, "big")


def msg(seq: int, sender: int = PEER, conv: bytes = CONV, **kw) -> mailbox_pb2.MailboxEntry:
    return mailbox_pb2.MailboxEntry(mailbox_seq=seq, event_type=1, message_id=mid(seq), conversation_id=conv,
                                    conversation_seq=seq, sender_id=sender, created_at_ms=seq, message_type=1,
                                    body=f"m{seq}".encode(), **kw)


def control(seq: int, event_type: int, event: message_pb2.ControlEvent, conv: bytes = CONV):
    return mailbox_pb2.MailboxEntry(mailbox_seq=seq, event_type=event_type, message_id=mid(seq),
                                    conversation_id=conv, conversation_seq=seq, sender_id=PEER, created_at_ms=seq,
                                    message_type=4, body=event.SerializeToString())


def recall(seq: int, target: int) -> mailbox_pb2.MailboxEntry:
    change = message_pb2.MessageStateChange(message_id=mid(target), state=1, conversation_seq=target)
    return control(seq, 2, message_pb2.ControlEvent(state_change=change))


def entry(read: int, head: int, unread: int, exact: bool = True, conv: bytes = CONV) -> session_pb2.SessionEntry:
    return session_pb2.SessionEntry(conversation_id=conv, kind=ids.conversation_kind(conv), peer_user_id=PEER,
                                    read_conversation_seq=read, unread=unread, unread_exact=exact,
                                    last_message=history_pb2.HistoryItem(message_id=mid(head), conversation_seq=head,
                                                                         sender_id=PEER, body=b"x",
                                                                         body_included=True))


@pytest.fixture
def store():
    return LocalStore.open(":memory:", TENANT, ME)


def unread(store, conv=CONV):
    c = store.conversation(conv)
    return c.unread, c.unread_exact


def test_own_messages_are_never_unread_and_mark_the_conversation_read(store):
    r = store.apply_mailbox_batch([msg(1), msg(2), msg(3, sender=ME), msg(4)], 4, 3, 1)
    assert unread(store) == (1, True)  # only seq 4: seq 1-2 read by our own send at 3
    (c,) = r.conversations
    assert (c.unread, c.read_conversation_seq, c.peer_user_id) == (1, 3, PEER)
    assert r.reads == [(CONV, 3)]
    assert c.last_message.body == b"m4" and c.last_conversation_seq == 4


def test_recalled_messages_and_control_messages_are_not_unread(store):
    store.apply_mailbox_batch([msg(1), msg(2), msg(3)], 3, 3, 1)
    assert unread(store) == (3, True)
    r = store.apply_mailbox_batch([recall(4, 2)], 4, 3, 1)
    assert unread(store) == (2, True)  # the recall notice (CONTROL) is the head, not unread
    assert r.conversations[0].last_message.message_type == 4 and r.conversations[0].last_conversation_seq == 4


def test_beyond_the_exact_window_unread_is_200_and_not_exact(store):
    store.apply_mailbox_batch([msg(n) for n in range(1, 206)], 205, 3, 1)
    assert unread(store) == (200, False)
    store.move_read(CONV, 5, False)
    assert unread(store) == (200, True)  # head − base = 200: counted exactly again


def test_server_count_stands_in_for_messages_the_store_does_not_hold_yet(store):
    store.apply_mailbox_batch([msg(5)], 5, 3, 1)  # the server counted 3 and 4 too
    store.apply_sessions([entry(read=2, head=5, unread=3)])
    assert unread(store) == (3, True)
    store.apply_mailbox_batch([msg(6)], 6, 3, 1)
    assert unread(store) == (4, True)  # server's 3 + ours above its head
    store.move_read(CONV, 4, False)  # read moved before the store holds 3 and 4: only a lower bound
    assert unread(store) == (2, False)
    assert store.unconfirmed_reads() == [(CONV, 4, PEER)]
    store.apply_mailbox_batch([msg(3), msg(4)], 7, 3, 1)
    store.apply_sessions([entry(read=4, head=6, unread=2)])  # SESSION_DELTA after the MARK_READ
    assert unread(store) == (2, True) and store.unconfirmed_reads() == []


def test_a_complete_store_counts_for_itself_after_a_recall(store):
    store.apply_mailbox_batch([msg(1), msg(2), msg(3)], 3, 3, 1)
    store.apply_sessions([entry(read=0, head=3, unread=3)])  # matches the store: complete
    store.apply_mailbox_batch([recall(4, 1)], 4, 3, 1)
    assert unread(store) == (2, True)


def test_read_position_only_moves_forward(store):
    store.apply_mailbox_batch([msg(1), msg(2), msg(3)], 3, 3, 1)
    r = store.move_read(CONV, 3, True)
    assert r.reads == [(CONV, 3)] and unread(store) == (0, True)
    r = store.apply_sessions([entry(read=1, head=3, unread=2)])  # an older snapshot
    assert r.reads == [] and store.conversation(CONV).read_conversation_seq == 3 and unread(store) == (0, True)


def test_membership_notices_set_the_group_and_the_member_interval(store):
    created = message_pb2.ControlEvent(membership=Kind(kind=Kind.CREATED, users=[PEER, ME], actor_user_id=PEER,
                                                       membership_version=1, group_id=GID))
    r = store.apply_mailbox_batch([control(1, 3, created, GROUP), msg(2, conv=GROUP)], 2, 3, 1)
    g = store.conversation(GROUP)
    assert (g.group_id, g.joined_at, g.left_at, g.unread, g.is_member) == (GID, 0, 0, 1, True)
    assert [m.group_id for m in r.membership] == [GID]
    left = message_pb2.ControlEvent(membership=Kind(kind=Kind.LEFT, users=[ME], actor_user_id=ME,
                                                    membership_version=2, group_id=GID))
    store.apply_mailbox_batch([control(3, 3, left, GROUP)], 3, 3, 1)
    assert store.conversation(GROUP).left_at == 3 and not store.conversation(GROUP).is_member


def test_list_is_newest_activity_first_and_ack_moves_head_and_read(store):
    other = ids.conversation_id_direct(TENANT, ME, PEER + 1)
    store.apply_mailbox_batch([msg(1), msg(2, conv=other)], 2, 3, 1)
    assert [c.conversation_id for c in store.conversations()] == [other, CONV]
    row = store.add_pending(CONV, PEER, 1, b"", "我的回复".encode())
    from qim.sdk.model import Resolved
    r = store.mark_acked(Resolved(row.client_message_id, mid(9), CONV, 9, 9))
    assert r.reads == [(CONV, 9)] and r.conversations[0].last_message.body == "我的回复".encode()
    assert [c.conversation_id for c in store.conversations()] == [CONV, other]


def test_a_version_2_store_gets_its_conversation_rows_on_open(tmp_path):
    path = str(tmp_path / "s.sqlite3")
    s = LocalStore.open(path, TENANT, ME)
    s.apply_mailbox_batch([msg(1), msg(2, sender=ME), msg(3)], 3, 3, 1)
    s._db.execute("DROP TABLE conversations")
    s._db.execute("UPDATE meta SET schema_version = 2")
    s.close()
    s = LocalStore.open(path, TENANT, ME)
    assert s._db.execute("SELECT schema_version FROM meta").fetchone() == (SCHEMA_VERSION,)
    c = s.conversation(CONV)
    assert (c.peer_user_id, c.read_conversation_seq, c.unread, c.last_conversation_seq) == (PEER, 2, 1, 3)
    s.close()
