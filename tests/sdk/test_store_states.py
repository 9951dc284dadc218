"""LocalStore v2: message states, whole bodies only, history reconciliation, the
migration from schema 1, idempotency keys of operations (docs/design.md §9)."""

from __future__ import annotations

import dataclasses
import sqlite3
from types import SimpleNamespace

import pytest

from qim._core import ids
from qim._core.types import MessageCoord
from qim.proto.v1 import history_pb2, mailbox_pb2, message_pb2
from qim.sdk.model import StoredMessage
from qim.sdk.schema import SCHEMA_VERSION
from qim.sdk.store import LocalStore, StoreError

TENANT, ME, PEER = 7, 1001, 2002
CONV = ids.conversation_id_direct(TENANT, ME, PEER)
NORMAL, RECALLED, DELETED = (message_pb2.MESSAGE_STATE_NORMAL, message_pb2.MESSAGE_STATE_RECALLED,
                             message_pb2.MESSAGE_STATE_DELETED)


def mid(n: int) -> bytes:
    return n.to_bytes(16, "big")


def entry(seq: int, n: int, body: bytes = b"", state: int = NORMAL, **kw) -> mailbox_pb2.MailboxEntry:
    return mailbox_pb2.MailboxEntry(mailbox_seq=seq, event_type=1, message_id=mid(n), conversation_id=CONV,
                                    conversation_seq=n, sender_id=PEER, created_at_ms=n, message_type=1,
                                    body=body or f"body {n}".encode(), state=state, **kw)


def item(n: int, body: bytes = b"", included: bool = True, state: int = NORMAL, **kw) -> history_pb2.HistoryItem:
    return history_pb2.HistoryItem(message_id=mid(n), conversation_seq=n, sender_id=PEER, created_at_ms=n,
                                   message_type=1, body=body if included else b"", body_included=included,
                                   state=state, **kw)


@pytest.fixture
def store():
    return LocalStore.open(":memory:", TENANT, ME)


def test_a_row_starts_with_the_one_message_coordinate(store):
    # the row's first fields are MessageCoord's, in its order (its flat layout is the
    # table's column order): a coordinate field added or moved there must move here too
    names = [f.name for f in dataclasses.fields(StoredMessage)]
    assert names[:len(MessageCoord._fields)] == list(MessageCoord._fields)
    store.apply_mailbox_batch([entry(10, 1, b"hi", custom_type=b"")], 10, 3, 1)
    (got,) = store.messages()
    assert got.coord == MessageCoord(mid(1), CONV, 1, PEER, 1, 1, b"")
    assert StoredMessage.at(got.coord, got.body, got.client_message_id, got.mailbox_seq, got.state) == got


def test_a_recalled_entry_is_stored_with_its_state_and_never_turns_normal_again(store):
    r = store.apply_mailbox_batch([entry(10, 1, state=RECALLED, body=b"")], 10, 3, 1)
    assert [(m.state, m.body) for m in r.inserted] == [(RECALLED, b"")]
    r = store.apply_mailbox_batch([entry(11, 1, body=b"")], 11, 3, 1)  # an inline copy without state
    assert r.inserted == r.updated == []
    assert [(m.state, m.body) for m in store.messages()] == [(RECALLED, b"")]


def test_a_full_copy_repairs_an_incomplete_row(store):
    store._db.execute("INSERT INTO messages (message_id, conversation_id, conversation_seq, sender_id, created_at_ms,"
                      " message_type, custom_type, body, client_message_id, mailbox_seq, source)"
                      " VALUES (?, ?, 1, ?, 1, 1, x'', x'', NULL, 9, 'push')", (mid(1), CONV, PEER))  # a v1 leftover
    r = store.apply_mailbox_batch([entry(10, 1, body=b"x" * 4097)], 10, 3, 1)
    assert [len(m.body) for m in r.updated] == [4097] and r.inserted == []
    assert store.messages()[0].body == b"x" * 4097


def test_history_item_without_its_body_is_refused_whole(store):
    with pytest.raises(StoreError):
        store.apply_history(CONV, [item(1, b"fine"), item(2, included=False)])  # a NORMAL head without body
    assert store.messages() == []  # nothing of the page was kept


def test_history_applies_states_and_resolves_own_sends(store):
    store.apply_mailbox_batch([entry(10, 1, b"secret"), entry(11, 2, b"kept")], 11, 3, 1)
    mine = store.add_pending(CONV, PEER, 1, b"", b"mine")
    own = item(3, b"mine", client_message_id=mine.client_message_id)
    own.sender_id = ME
    r = store.apply_history(CONV, [item(1, included=False, state=RECALLED), item(2, b"kept"), own])
    assert [(m.message_id, m.state, m.body) for m in r.updated] == [(mid(1), RECALLED, b"")]
    assert [m.message_id for m in r.inserted] == [mid(3)] and r.inserted[0].mailbox_seq == 0
    assert [x.client_message_id for x in r.resolved] == [mine.client_message_id]
    assert store.pending_state(mine.client_message_id) == "committed"


def test_remove_absent_drops_only_rows_history_did_not_return(store):
    store.apply_mailbox_batch([entry(10 + n, n) for n in (1, 2, 3, 4)], 14, 3, 1)
    gone = store.remove_absent(CONV, 1, {mid(3)})  # history (seq > 1) returned only 3
    assert gone.removed == [mid(2), mid(4)] and gone.inserted == gone.updated == []
    assert [m.conversation_seq for m in store.messages()] == [1, 3]


def test_conversations_held_names_a_peer_for_rebuild(store):
    store.apply_mailbox_batch([entry(10, 4), entry(11, 6)], 11, 3, 1)
    other = ids.conversation_id_direct(TENANT, ME, PEER + 5)
    store.add_pending(other, PEER + 5, 1, b"", b"only mine")
    own = entry(12, 2)
    own.conversation_id, own.sender_id = other, ME
    store.apply_mailbox_batch([own], 12, 3, 1)
    assert store.conversations_held() == {CONV: (4, PEER), other: (2, PEER + 5)}


V1_SCHEMA = """
CREATE TABLE meta (id INTEGER PRIMARY KEY CHECK (id = 1), schema_version INTEGER NOT NULL,
  tenant_hex TEXT NOT NULL, user_id INTEGER NOT NULL, device_id INTEGER NOT NULL, next_ordinal INTEGER NOT NULL);
CREATE TABLE cursor (id INTEGER PRIMARY KEY CHECK (id = 1), lane INTEGER NOT NULL, shard_epoch INTEGER NOT NULL,
  last_applied_seq INTEGER NOT NULL);
CREATE TABLE messages (message_id BLOB PRIMARY KEY CHECK (length(message_id) = 16),
  conversation_id BLOB NOT NULL CHECK (length(conversation_id) = 16), conversation_seq INTEGER NOT NULL,
  sender_id INTEGER NOT NULL, created_at_ms INTEGER NOT NULL, message_type INTEGER NOT NULL,
  custom_type BLOB NOT NULL, body BLOB NOT NULL, client_message_id BLOB, mailbox_seq INTEGER NOT NULL,
  source TEXT NOT NULL) WITHOUT ROWID;
CREATE INDEX messages_by_conv ON messages (conversation_id, conversation_seq);
CREATE TABLE pending (client_message_id BLOB PRIMARY KEY CHECK (length(client_message_id) = 16),
  ordinal INTEGER NOT NULL UNIQUE, conversation_id BLOB NOT NULL CHECK (length(conversation_id) = 16),
  recipient_user_id INTEGER NOT NULL, message_type INTEGER NOT NULL, custom_type BLOB NOT NULL,
  body BLOB NOT NULL, created_local_ms INTEGER NOT NULL, state TEXT NOT NULL,
  message_id BLOB, conversation_seq INTEGER, created_at_ms INTEGER) WITHOUT ROWID;
"""


def v1_store(path: str, empty_body: bool) -> bytes:
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(V1_SCHEMA)
    db.execute("INSERT INTO meta VALUES (1, 1, ?, ?, 55, 64)", (f"{TENANT:032x}", ME))
    db.execute("INSERT INTO cursor VALUES (1, 3, 1, 42)")
    db.execute("INSERT INTO messages VALUES (?, ?, 1, ?, 1, 1, x'', ?, NULL, 42, 'push')",
               (mid(1), CONV, PEER, b"" if empty_body else b"whole"))
    old_cmid = bytes(range(1, 17))  # derived by v1 (device, ordinal) and maybe already on the wire
    db.execute("INSERT INTO pending VALUES (?, 3, ?, ?, 1, x'', x'6869', 5, 'pending', NULL, NULL, NULL)",
               (old_cmid, CONV, PEER))
    db.close()
    return old_cmid


@pytest.mark.parametrize("empty_body", [True, False])
def test_schema_1_migrates_to_2(tmp_path, empty_body):
    path = str(tmp_path / "v1.sqlite3")
    old_cmid = v1_store(path, empty_body)
    s = LocalStore.open(path, TENANT, ME)
    assert s.device_id == 55 and len(s.store_nonce) == 16
    assert s._db.execute("SELECT schema_version FROM meta").fetchone() == (SCHEMA_VERSION,)
    assert [(m.body, m.state) for m in s.messages()] == [(b"" if empty_body else b"whole", NORMAL)]
    assert s.rebuild_needed() is empty_body  # an empty v1 body may be a truncated reference: ask history
    (row,) = s.pending_sends()
    assert row.client_message_id == old_cmid and row.body == b"hi"  # kept as sent
    assert s.add_pending(CONV, PEER, 1, b"", b"new").client_message_id == ids.client_message_id(s.store_nonce, 55, 64)
    nonce = s.store_nonce
    s.reset_cursor()
    s.close()
    s = LocalStore.open(path, TENANT, ME)
    assert s.store_nonce != nonce and not s.rebuild_needed() and s.cursor() is None  # a nonce per open (0081)


def test_unknown_schema_version_is_refused(tmp_path):
    path = str(tmp_path / "future.sqlite3")
    LocalStore.open(path, TENANT, ME).close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("UPDATE meta SET schema_version = 99")
    db.close()
    with pytest.raises(StoreError, match="version 99"):
        LocalStore.open(path, TENANT, ME)


def test_operation_keys_are_kept_until_answered(store):
    cmid, answer = store.op_begin("create_group", b"g1", True)
    assert answer is None and store.op_begin("create_group", b"g1", True) == (cmid, None)  # a retry: same key
    other, _ = store.op_begin("create_group", b"g2", True)
    assert other != cmid
    store.op_end("create_group", b"g1", cmid, b"reply")
    assert store.op_begin("create_group", b"g1", True) == (cmid, b"reply")  # answered: the original answer
    leave, _ = store.op_begin("leave_group", b"g1", False)
    store.op_end("leave_group", b"g1", leave, b"left")
    again, answer = store.op_begin("leave_group", b"g1", False)  # a later leave is a new operation
    assert answer is None and again != leave
    store.op_end("create_group", b"g2", other, None)  # a permanent error: the next call starts afresh
    fresh, answer = store.op_begin("create_group", b"g2", True)
    assert answer is None and fresh != other


def test_a_garbled_notice_target_changes_nothing(store):
    store.apply_mailbox_batch([entry(10, 1)], 10, 3, 1)
    notice = SimpleNamespace(event_type=2, body=b"\xff\xff", mailbox_seq=11)
    r = store.apply_mailbox_batch([notice], 11, 3, 1)
    assert r.updated == [] and store.cursor() == (3, 1, 11) and store.messages()[0].state == NORMAL
