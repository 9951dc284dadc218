"""How the LocalStore applies what the server says about messages (docs/design.md §9).

Only two sources carry whole bodies and reach the store: MAILBOX_BATCH entries (the
mailbox resolves referenced bodies before it answers) and HISTORY_BATCH items. An
inline PUSH_EVENTS reaches it only as the MAILBOX_BATCH it stands for (its entries are
the page a pull from prev_mailbox_seq returns, bodies inline: qim/sdk/puller.py,
docs/decisions/0156); any other push is a wake-up for a pull and nothing else, and
session heads never reach it (their body may be left out). A row is never kept with a body known to be incomplete: a history
item in state NORMAL without its body is refused (StoreError), and a stored row that
disagrees with a later full copy (an empty body left by a version-1 store) is repaired.

Every function runs inside the caller's transaction and returns what changed, so the
caller tells the app only after the commit. States (MessageState): 0 NORMAL,
1 RECALLED, 2 DELETED; a recalled or deleted row keeps its coordinates and state and
loses its body.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import replace
from typing import Any, Iterable, Optional

from qim._core.types import MessageCoord
from qim.consts import MESSAGE_TYPE_CONTROL
from qim.proto.v1 import message_pb2
from qim.protocol import EventType
from qim.sdk import extras
from qim.sdk.model import ApplyResult, Resolved, StoredMessage, StoreError
from qim.wire.control import control_event

logger = logging.getLogger(__name__)

NORMAL = message_pb2.MESSAGE_STATE_NORMAL
NOTICE_STATES = {EventType.RECALL: message_pb2.MESSAGE_STATE_RECALLED,
                 EventType.DELETE: message_pb2.MESSAGE_STATE_DELETED}
COLUMNS = ("message_id, conversation_id, conversation_seq, sender_id, created_at_ms, message_type,"
           " custom_type, body, client_message_id, mailbox_seq, state")
COMMITTED = "committed"
# what a read selects: the row's columns, then its extras (qim/sdk/extras.py)
READ_COLUMNS = f"{COLUMNS}, {extras.MESSAGE_COLUMN}"


def row(db: sqlite3.Connection, message_id: bytes) -> Optional[StoredMessage]:
    """The stored message, or None."""
    got = db.execute(f"SELECT {READ_COLUMNS} FROM messages WHERE message_id = ?", (message_id,)).fetchone()
    return StoredMessage(*got) if got else None


def upsert(db: sqlite3.Connection, msg: StoredMessage, source: str) -> str:
    """Store `msg` (a full copy from the server). Returns 'inserted', 'updated' (state or
    body differed: the server's copy wins, except that a recalled or deleted row never
    turns NORMAL again, and an edited body never goes back to an older version) or ''
    (nothing changed). Its extras (reply, mentions, edit mark) are stored beside it."""
    old = row(db, msg.message_id)
    if old is not None and old.state == NORMAL and msg.state == NORMAL and old.version > msg.version:
        return ""  # an older copy (an inline mailbox entry) after a newer edit: keep the edit
    changed_extras = extras.put(db, msg.message_id, msg.extras) if (msg.extras or old is not None) else False
    if old is None:
        # ON CONFLICT, not OR IGNORE: OR IGNORE would also swallow CHECK/NOT NULL
        # violations and let the cursor pass an entry that was never stored.
        db.execute(f"INSERT INTO messages ({COLUMNS}, source) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                   (*msg.coord, msg.body, msg.client_message_id, msg.mailbox_seq, msg.state, source))
        return "inserted"
    if old.state != NORMAL and msg.state == NORMAL:
        return ""  # recall and delete are final (the writer never reverts them)
    if (old.state, old.body) == (msg.state, msg.body):
        return "updated" if changed_extras else ""
    db.execute("UPDATE messages SET state = ?, body = ? WHERE message_id = ?", (msg.state, msg.body, msg.message_id))
    return "updated"


def set_state(db: sqlite3.Connection, message_id: bytes, state: int) -> Optional[StoredMessage]:
    """A recall/delete notice: the stored copy loses its body and takes the state.
    Returns the changed row, None when it is not stored or already in that state."""
    cur = db.execute("UPDATE messages SET state = ?, body = x'' WHERE message_id = ? AND (state != ? OR body != x'')",
                     (state, message_id, state))
    return row(db, message_id) if cur.rowcount else None


def unquoted(db: sqlite3.Connection, target: bytes, state: int) -> list[StoredMessage]:
    """The stored replies quoting `target`, now recalled or deleted, without its text
    (extras.unquote; docs/decisions/0134): the rows changed, to tell the app."""
    rows = (row(db, mid) for mid in extras.unquote(db, target, state))
    return [r for r in rows if r is not None]


def resolve_own(db: sqlite3.Connection, user_id: int, msg: StoredMessage) -> Optional[Resolved]:
    """Our own committed message carries its cmid: the pending row becomes committed,
    but only when the message is the send that row holds. The writer's identity of a
    send (qim/wire/validate.py identity_digest) is its conversation, type, custom type
    and body (the recipient is named by a direct conversation's id, 0 in a group), so
    those must match; the body only while the message still has it (a recalled or
    deleted copy has none: the rest decides). An own message with our cmid and other
    content is another device's send that took the cmid: it is shown as a message and
    resolves nothing, and our send gets its own answer from the writer (CONFLICT)."""
    if msg.client_message_id is None or msg.sender_id != user_id:
        return None
    cur = db.execute("UPDATE pending SET state = ?, message_id = ?, conversation_seq = ?, created_at_ms = ?"
                     " WHERE client_message_id = ? AND state != ? AND conversation_id = ? AND message_type = ?"
                     " AND custom_type = ? AND (? OR body = ?)",
                     (COMMITTED, msg.message_id, msg.conversation_seq, msg.created_at_ms, msg.client_message_id,
                      COMMITTED, msg.conversation_id, msg.message_type, msg.custom_type, msg.state != NORMAL,
                      msg.body))
    if not cur.rowcount:
        return None
    return Resolved(msg.client_message_id, msg.message_id, msg.conversation_id, msg.conversation_seq,
                    msg.created_at_ms)


def _notice_target(e: Any) -> tuple[bytes, int]:
    event = control_event(bytes(e.body))
    if event is None:
        # a server bug must not wedge the cursor on this entry forever
        logger.warning("unreadable recall/delete notice at mailbox_seq %d", e.mailbox_seq)
        return b"", 0
    change = event.state_change
    return bytes(change.message_id), int(change.state) or NOTICE_STATES[e.event_type]


def apply_mailbox_entries(db: sqlite3.Connection, user_id: int, entries: Iterable[Any]) -> ApplyResult:
    """MAILBOX_BATCH entries (whole bodies, mailbox state) in mailbox order."""
    out = ApplyResult([], [], [], [])
    for e in entries:
        if e.event_type == EventType.EDIT:  # docs/decisions/0120: the latest body and version
            edited = extras.apply_edit(db, bytes(e.body))
            changed = row(db, edited) if edited is not None else None
            if changed is not None:
                out.updated.append(changed)
            continue
        if e.event_type in NOTICE_STATES:
            target, state = _notice_target(e)
            changed = set_state(db, target, state) if target else None
            if changed is not None:
                out.updated.append(changed)
            out.updated.extend(unquoted(db, target, state) if target else [])  # decision 0134
            continue
        if e.event_type != EventType.MESSAGE:
            continue  # MEMBERSHIP notices are not stored as messages
        state = int(e.state)
        msg = replace(StoredMessage.at(MessageCoord.of(e), bytes(e.body) if state == NORMAL else b"",
                                       bytes(e.client_message_id) or None, e.mailbox_seq, state),
                      extras=extras.record_extras(e))
        _record(db, user_id, msg, "mailbox", out)
    return _ordered(out)


def apply_history_items(db: sqlite3.Connection, user_id: int, conversation_id: bytes,
                        items: Iterable[Any]) -> ApplyResult:
    """HISTORY_BATCH items of one conversation (REBUILD). body_included=false means the
    message has no body (recalled/deleted: its state is kept); a NORMAL item without
    its body is incomplete and refused with StoreError (the transaction rolls back)."""
    out = ApplyResult([], [], [], [])
    for item in items:
        if item.message_type == MESSAGE_TYPE_CONTROL:
            continue
        state = int(item.state)
        if state == NORMAL and not item.body_included:
            raise StoreError(f"history item at conversation_seq {item.conversation_seq} came without its body")
        coord = MessageCoord(bytes(item.message_id), bytes(conversation_id), item.conversation_seq, item.sender_id,
                             item.created_at_ms, int(item.message_type), bytes(item.custom_type))
        msg = replace(StoredMessage.at(coord, bytes(item.body) if state == NORMAL else b"",
                                       bytes(item.client_message_id) or None, 0, state),
                      extras=extras.record_extras(item))
        _record(db, user_id, msg, "history", out)
    return _ordered(out)


def remove_absent(db: sqlite3.Connection, conversation_id: bytes, above_seq: int,
                  seen: set[bytes]) -> list[bytes]:
    """After a history walk of `conversation_id` from `above_seq` (exclusive) to its end:
    delete the stored rows history did not return (outside every member interval of
    this user, so no longer shown). Returns their message_ids in conversation_seq order."""
    rows = db.execute("SELECT message_id FROM messages WHERE conversation_id = ? AND conversation_seq > ?"
                      " ORDER BY conversation_seq", (conversation_id, above_seq)).fetchall()
    gone = [bytes(mid) for (mid,) in rows if bytes(mid) not in seen]
    db.executemany("DELETE FROM messages WHERE message_id = ?", [(mid,) for mid in gone])
    return gone


def _record(db: sqlite3.Connection, user_id: int, msg: StoredMessage, source: str, out: ApplyResult) -> None:
    outcome = upsert(db, msg, source)
    if outcome == "inserted":
        out.inserted.append(msg)
    elif outcome == "updated":
        out.updated.append(msg)
    resolved = resolve_own(db, user_id, msg)
    if resolved is not None:
        out.resolved.append(resolved)


def _ordered(out: ApplyResult) -> ApplyResult:
    """Per conversation in conversation_seq order (conversations in first-seen order), so
    an app is never told a conversation out of order within one apply."""
    first: dict[bytes, int] = {}
    for m in out.inserted:
        first.setdefault(m.conversation_id, len(first))
    out.inserted.sort(key=lambda m: (first[m.conversation_id], m.conversation_seq))
    return out
