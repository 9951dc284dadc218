"""Replies, mentions and edits in the LocalStore (docs/decisions/0120; docs/sdk.md "Replies,
mentions and edits").

Two side tables, created on every open (CREATE ... IF NOT EXISTS: no schema version,
an older SDK opening the store ignores them, as an older client ignores the fields):
- message_extras: message_id -> a MessageRecord holding only fields 13-17 (reply,
  mentions, version, edit time) as the server gave them;
- pending_extras: client_message_id -> a SendMessage holding only fields 9-11 (reply
  target, mentions): part of the send's identity, so every retransmission carries them.
Triggers drop a side row with its message or pending row.

An edit reaches the store as the latest body with version > 0 (a history item or a
resolved mailbox entry), or as the CONTROL notice of EventType.EDIT in mailbox order
(`apply_edit`); a lower version never replaces a higher one and a recalled row never
takes a body again.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Iterable, Optional

from qim.consts import ID_LEN, MAX_MENTIONS, U63_MAX
from qim.errors import ErrorCode
from qim.proto.v1 import message_pb2
from qim.sdk.events import SendRefused
from qim.wire.control import control_event

DDL = (
    "CREATE TABLE IF NOT EXISTS message_extras (message_id BLOB PRIMARY KEY CHECK (length(message_id) = 16),"
    " extras BLOB NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS pending_extras (client_message_id BLOB PRIMARY KEY"
    " CHECK (length(client_message_id) = 16), extras BLOB NOT NULL) WITHOUT ROWID",
    "CREATE TRIGGER IF NOT EXISTS message_extras_gone AFTER DELETE ON messages BEGIN"
    " DELETE FROM message_extras WHERE message_id = old.message_id; END",
    "CREATE TRIGGER IF NOT EXISTS pending_extras_gone AFTER DELETE ON pending BEGIN"
    " DELETE FROM pending_extras WHERE client_message_id = old.client_message_id; END",
    # replies holding a quote, by the quoted message: a recall or removal of it clears
    # their quotes (`unquote`, docs/decisions/0134) without a scan
    "CREATE TABLE IF NOT EXISTS reply_quotes (target_id BLOB NOT NULL, message_id BLOB NOT NULL,"
    " PRIMARY KEY (target_id, message_id)) WITHOUT ROWID",
    "CREATE TRIGGER IF NOT EXISTS reply_quotes_gone AFTER DELETE ON messages BEGIN"
    " DELETE FROM reply_quotes WHERE message_id = old.message_id; END",
)
# the extras of a messages / pending row as one more selected column (b"" when none)
MESSAGE_COLUMN = ("coalesce((SELECT x.extras FROM message_extras x WHERE x.message_id = messages.message_id),"
                  " x'')")
PENDING_COLUMN = ("coalesce((SELECT x.extras FROM pending_extras x"
                  " WHERE x.client_message_id = pending.client_message_id), x'')")


def create(db: sqlite3.Connection) -> None:
    """The side tables and triggers (idempotent; inside the open's transaction)."""
    for statement in DDL:
        db.execute(statement)


def send_extras(reply_to: Optional[bytes], mentions: Iterable[int], mention_all: bool) -> bytes:
    """The SendMessage fields 9-11 of a send, serialized (b"" for a plain send).
    SendRefused(INVALID_ARGUMENT) for what the server would refuse."""
    users = [int(u) for u in mentions]
    if reply_to is not None and (len(reply_to) != ID_LEN or not any(reply_to)):
        raise SendRefused(ErrorCode.INVALID_ARGUMENT, "reply_to must be a message_id (16 non-zero bytes)")
    if len(users) > MAX_MENTIONS:
        raise SendRefused(ErrorCode.INVALID_ARGUMENT, f"more than {MAX_MENTIONS} mentioned users")
    if len(set(users)) != len(users) or any(not 0 < u <= U63_MAX for u in users):
        raise SendRefused(ErrorCode.INVALID_ARGUMENT, "mentions must be distinct user ids")
    msg = message_pb2.SendMessage(reply_to_message_id=bytes(reply_to or b""), mention_user_ids=users,
                                  mention_all=bool(mention_all))
    return msg.SerializeToString(deterministic=True)


def record_extras(src: Any) -> bytes:
    """Fields 13-17 of a MailboxEntry or HistoryItem as stored bytes (b"" when none)."""
    rec = message_pb2.MessageRecord(mention_user_ids=list(src.mention_user_ids), mention_all=src.mention_all,
                                    version=src.version)
    if src.HasField("reply"):
        rec.reply.CopyFrom(src.reply)
    if src.edited_at_ms:
        rec.edits.edited_at_ms = src.edited_at_ms
    return rec.SerializeToString(deterministic=True)


def version_of(extras: bytes) -> int:
    """The edit version held in stored extras (0: never edited)."""
    return message_pb2.MessageRecord.FromString(extras).version if extras else 0


def stored(db: sqlite3.Connection, message_id: bytes) -> bytes:
    """The stored extras of a message (b"" when none)."""
    got = db.execute("SELECT extras FROM message_extras WHERE message_id = ?", (message_id,)).fetchone()
    return bytes(got[0]) if got else b""


def put(db: sqlite3.Connection, message_id: bytes, extras: bytes) -> bool:
    """Store `extras` for a message; whether anything changed. A reply's quote of a
    message this store holds as recalled or deleted is stored without its preview, and
    one with a preview is indexed for `unquote` (docs/decisions/0134)."""
    rec = message_pb2.MessageRecord.FromString(extras) if extras else None
    if rec is not None and rec.HasField("reply") and rec.reply.preview:
        target = bytes(rec.reply.message_id)
        got = db.execute("SELECT state FROM messages WHERE message_id = ?", (target,)).fetchone()
        if got is not None and got[0] != message_pb2.MESSAGE_STATE_NORMAL:
            rec.reply.state, rec.reply.preview = got[0], ""
            extras = rec.SerializeToString(deterministic=True)
        else:
            db.execute("INSERT OR IGNORE INTO reply_quotes (target_id, message_id) VALUES (?, ?)", (target, message_id))
    if extras == stored(db, message_id):
        return False
    db.execute("INSERT OR REPLACE INTO message_extras (message_id, extras) VALUES (?, ?)", (message_id, extras))
    return True


def unquote(db: sqlite3.Connection, target: bytes, state: int) -> list[bytes]:
    """`target` was recalled or deleted (`state`): the stored replies quoting it lose the
    preview and take the state (docs/decisions/0134). Returns the replies changed."""
    changed = []
    for (mid,) in db.execute("SELECT message_id FROM reply_quotes WHERE target_id = ?", (target,)).fetchall():
        old = stored(db, bytes(mid))
        if old:
            rec = message_pb2.MessageRecord.FromString(old)
            rec.reply.MergeFrom(message_pb2.ReplyRef(state=state))  # an open enum: the int as given
            rec.reply.preview = ""
            db.execute("UPDATE message_extras SET extras = ? WHERE message_id = ?",
                       (rec.SerializeToString(deterministic=True), bytes(mid)))
            changed.append(bytes(mid))
    db.execute("DELETE FROM reply_quotes WHERE target_id = ?", (target,))
    return changed


def put_pending(db: sqlite3.Connection, cmid: bytes, extras: bytes) -> None:
    """The reply target and mentions of a pending send (nothing for a plain send)."""
    if extras:
        db.execute("INSERT INTO pending_extras (client_message_id, extras) VALUES (?, ?)", (cmid, extras))


def apply_edit(db: sqlite3.Connection, body: bytes) -> Optional[bytes]:
    """A CONTROL notice of EventType.EDIT (its body: a ControlEvent.edit): the stored copy
    takes the new body and version when it is NORMAL and older. Returns the message_id
    changed, None when nothing changed (not stored, recalled, already as new)."""
    event = control_event(body)
    if event is None or event.WhichOneof("event") != "edit":
        return None  # an unreadable notice must not wedge the cursor on it
    edit = event.edit
    mid = bytes(edit.message_id)
    got = db.execute("SELECT state FROM messages WHERE message_id = ?", (mid,)).fetchone()
    old = stored(db, mid)
    if got is None or got[0] != message_pb2.MESSAGE_STATE_NORMAL or version_of(old) >= edit.version:
        return None
    rec = message_pb2.MessageRecord.FromString(old) if old else message_pb2.MessageRecord()
    rec.version = edit.version
    rec.edits.edited_at_ms = edit.edited_at_ms
    db.execute("UPDATE messages SET body = ? WHERE message_id = ?", (bytes(edit.body), mid))
    put(db, mid, rec.SerializeToString(deterministic=True))
    return mid
