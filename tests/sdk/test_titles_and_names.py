"""Group titles and display names in the LocalStore (qim/sdk/titles.py, schema 4): the
newest title wins whatever the order it arrives in (session list, CREATED notice, title
notices), a title notice is never unread, a version-3 store migrates, names are kept
(pure logic on a real SQLite store, no server)."""

from __future__ import annotations

from qim._core import ids
from qim.proto.v1 import history_pb2, mailbox_pb2, message_pb2, session_pb2
from qim.sdk.schema import SCHEMA_VERSION
from qim.sdk.store import LocalStore

TENANT, ME, OWNER, GID = 7, 1001, 2002, 55
GROUP = ids.conversation_id_group(TENANT, GID)


def notice(seq: int, event: message_pb2.ControlEvent) -> mailbox_pb2.MailboxEntry:
    return mailbox_pb2.MailboxEntry(mailbox_seq=seq, event_type=3, message_id=seq.to_bytes(16, "big"),
                                    conversation_id=GROUP, conversation_seq=seq, sender_id=OWNER, created_at_ms=seq,
                                    message_type=4, body=event.SerializeToString())


def created(seq: int, title: str) -> mailbox_pb2.MailboxEntry:
    return notice(seq, message_pb2.ControlEvent(membership=message_pb2.MembershipChange(
        kind=1, users=[OWNER, ME], actor_user_id=OWNER, membership_version=1, group_id=GID, title=title)))


def renamed(seq: int, title: str) -> mailbox_pb2.MailboxEntry:
    return notice(seq, message_pb2.ControlEvent(title_change=message_pb2.GroupTitleChange(
        group_id=GID, title=title, actor_user_id=OWNER)))


def listed(head: int, title: str) -> session_pb2.SessionEntry:
    item = history_pb2.HistoryItem(message_id=head.to_bytes(16, "big"), conversation_seq=head, sender_id=OWNER,
                                   message_type=4, body_included=True)
    return session_pb2.SessionEntry(conversation_id=GROUP, kind=2, group_id=GID, last_message=item,
                                    group_title=title)


def test_the_newest_title_wins_in_any_order_and_is_never_unread():
    s = LocalStore.open(":memory:", TENANT, ME)
    s.apply_mailbox_batch([created(1, "first"), renamed(3, "third")], 3, 3, 1)
    c = s.conversation(GROUP)
    assert (c.title, c.unread, c.group_id) == ("third", 0, GID)
    s.apply_sessions([listed(2, "second")])  # an older list page does not undo it
    assert s.conversation(GROUP).title == "third"
    s.apply_sessions([listed(5, "fifth")])
    s.apply_mailbox_batch([renamed(4, "fourth")], 4, 3, 1)  # a late notice does not either
    assert s.conversation(GROUP).title == "fifth"
    s.apply_mailbox_batch([renamed(6, "")], 6, 3, 1)  # the owner removed the title
    assert s.conversation(GROUP).title == "" and s.conversation(GROUP).unread == 0
    s.close()


def test_a_version_3_store_migrates_and_names_are_kept(tmp_path):
    path = str(tmp_path / "s.sqlite3")
    s = LocalStore.open(path, TENANT, ME)
    s.apply_mailbox_batch([created(1, "kept after the migration?")], 1, 3, 1)
    s._db.executescript("ALTER TABLE conversations DROP COLUMN title; ALTER TABLE conversations DROP COLUMN title_seq;"
                        "DROP TABLE profiles; UPDATE meta SET schema_version = 3;")
    s.close()
    s = LocalStore.open(path, TENANT, ME)
    assert s._db.execute("SELECT schema_version FROM meta").fetchone() == (SCHEMA_VERSION,) == (5,)
    assert s.conversation(GROUP).title == ""  # filled in again by the next list pull
    s.apply_sessions([listed(1, "from the list")])
    assert s.conversation(GROUP).title == "from the list"
    assert s.profiles([OWNER]) == {}
    s.store_profiles([(OWNER, "Bob"), (ME, "")], 1)
    s.store_profiles([(OWNER, "Robert")], 2)
    assert s.profiles([OWNER, ME, 3]) == {OWNER: "Robert", ME: ""}
    s.close()
