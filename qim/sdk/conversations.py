"""The device's conversation list in the LocalStore (docs/design.md §6, §9; seed 000 未读与已读).

One row per conversation: kind, peer (direct) or group id and the latest member
interval, the user's read position (forward only, shared by devices), the head (newest
visible message of any type, CONTROL included, as the server defines it), the last
server snapshot of the entry (SESSION_LIST_BATCH / SESSION_DELTA: absolute values) and
the unread count derived from both. Every function runs inside the caller's
transaction, so a batch and the list entries it changes commit together and the app is
told ConversationsUpdated (already counting the batch) before MessagesAdded.

Unread has the server's one definition (qim/services/session/summary.py): |{m visible :
m.seq > base ∧ m.sender ≠ self ∧ type ≠ CONTROL ∧ state = NORMAL}|, base = max(read,
joined_at), visible = inside the member interval (seq ≤ left_at once the user left) —
never latest − read. Exact while head − base ≤ 200 (UNREAD_EXACT_WINDOW), else 200 and
not exact. The local count is exact only when the store holds every such message: the
server's snapshot tells (its count over (its base, its head] equals ours: `complete`),
and until then the server's count plus ours above its head is used while the read
position is the one the server counted from; otherwise the local count is a lower
bound with `unread_exact` False (seed: "同步完成前是下界，只会少报不会多报"). Own
messages of every type (a leave, a recall notice) move the read position to them, as
the server's registration does: a group left unread is read up to its LEFT message.
Group titles: qim/sdk/titles.py.
"""
from __future__ import annotations

import sqlite3
import time
from typing import Any, Iterable, Optional

from google.protobuf.message import DecodeError

from qim._core import ids
from qim.consts import CONVERSATION_KIND_GROUP, MESSAGE_TYPE_CONTROL, SESSION_HEAD_BODY_MAX, UNREAD_EXACT_WINDOW
from qim.errors import IdError
from qim.proto.v1 import history_pb2, message_pb2
from qim.protocol import EventType
from qim.sdk import titles
from qim.sdk.model import ApplyResult, Conversation, LastMessage, Membership, StoredMessage

NORMAL = message_pb2.MESSAGE_STATE_NORMAL
Kind = message_pb2.MembershipChange
FIELDS = ("conversation_id, kind, peer_user_id, group_id, joined_at, left_at, read_seq, read_confirmed, head_seq,"
          " last_activity_id, head, srv_read_seq, srv_head_seq, srv_unread, srv_exact, complete, unread,"
          " unread_exact, title")


class Touch:
    """What one transaction changed in the list: conversations to recompute, read
    positions moved and membership changes applied (folded into an ApplyResult)."""

    def __init__(self) -> None:
        self.convs: dict[bytes, None] = {}
        self.reads: dict[bytes, int] = {}
        self.membership: list[Membership] = []

    def add(self, conversation_id: bytes) -> None:
        """Mark a conversation for recomputation after this transaction."""
        self.convs.setdefault(bytes(conversation_id), None)


def _now() -> int:
    return int(time.time() * 1000)


def ensure(db: sqlite3.Connection, conversation_id: bytes, peer: int = 0, group_id: int = 0) -> None:
    """Create the row when absent; fill a peer or group id not known yet."""
    conv = bytes(conversation_id)
    try:
        kind = ids.conversation_kind(conv)
    except IdError:
        return  # not a conversation a list can hold (the apply refuses such rows anyway)
    db.execute("INSERT INTO conversations (conversation_id, kind, peer_user_id, group_id, updated_local_ms)"
               " VALUES (?,?,?,?,?) ON CONFLICT (conversation_id) DO NOTHING", (conv, kind, peer, group_id, _now()))
    if peer or group_id:
        db.execute("UPDATE conversations SET peer_user_id = CASE WHEN peer_user_id = 0 THEN ? ELSE peer_user_id END,"
                   " group_id = CASE WHEN group_id = 0 THEN ? ELSE group_id END WHERE conversation_id = ?",
                   (peer, group_id, conv))


def head_item(message_id: bytes, seq: int, sender: int, created_at_ms: int, message_type: int, custom_type: bytes,
              body: bytes, state: int) -> bytes:
    """A head as stored: HistoryItem bytes with the body cut at SESSION_HEAD_BODY_MAX
    (body_included False then), like the server's session heads."""
    whole = state == NORMAL and len(body) <= SESSION_HEAD_BODY_MAX
    return history_pb2.HistoryItem(message_id=message_id, conversation_seq=seq, sender_id=sender,
                                   created_at_ms=created_at_ms, message_type=message_type, custom_type=custom_type,
                                   body=body if whole else b"", body_included=whole,
                                   state=state).SerializeToString()


def advance_head(db: sqlite3.Connection, conversation_id: bytes, message_id: bytes, seq: int, item: bytes) -> None:
    """Make the message the head when it is newer (or the head itself changed state)."""
    db.execute("UPDATE conversations SET head_seq = ?, last_activity_id = ?, head = ?, updated_local_ms = ?"
               " WHERE conversation_id = ? AND (head_seq < ? OR (head_seq = ? AND last_activity_id = ?))",
               (seq, message_id, item, _now(), conversation_id, seq, seq, message_id))


def move_read(db: sqlite3.Connection, conversation_id: bytes, seq: int, confirmed: bool, touch: Touch) -> None:
    """Read position forward only; `confirmed`: the server holds it already."""
    cur = db.execute("UPDATE conversations SET read_seq = ? WHERE conversation_id = ? AND read_seq < ?",
                     (seq, conversation_id, seq))
    if cur.rowcount:
        touch.reads[bytes(conversation_id)] = seq
    if confirmed:
        db.execute("UPDATE conversations SET read_confirmed = ? WHERE conversation_id = ? AND read_confirmed < ?",
                   (seq, conversation_id, seq))
    touch.add(conversation_id)


def note_message(db: sqlite3.Connection, user_id: int, msg: StoredMessage, touch: Touch) -> None:
    """A stored (or changed) message: head, peer, and our own messages mark read."""
    conv = msg.conversation_id
    direct_peer = msg.sender_id if msg.sender_id != user_id and ids.conversation_kind(conv) != \
        CONVERSATION_KIND_GROUP else 0
    ensure(db, conv, peer=direct_peer)
    advance_head(db, conv, msg.message_id, msg.conversation_seq,
                 head_item(msg.message_id, msg.conversation_seq, msg.sender_id, msg.created_at_ms, msg.message_type,
                           msg.custom_type, msg.body, msg.state))
    if msg.sender_id == user_id:
        move_read(db, conv, msg.conversation_seq, True, touch)
    touch.add(conv)


def note_control(db: sqlite3.Connection, user_id: int, e: Any, touch: Touch) -> None:
    """A CONTROL mailbox entry (membership, recall or delete notice): it is the newest
    message of its conversation, and a membership change of the user itself moves the
    member interval (joiners see seq > J−1, leavers up to J; docs/design.md §7)."""
    conv = bytes(getattr(e, "conversation_id", b""))
    if len(conv) != 16 or not any(conv):
        return  # a garbled notice: the message apply already refused to act on it
    change = named = None
    if e.event_type == EventType.MEMBERSHIP:
        try:
            event = message_pb2.ControlEvent.FromString(bytes(e.body))
            change = event.membership if event.HasField("membership") else None
            named = titles.notice_title(event)
        except DecodeError:
            change = None  # an unreadable notice moves the head only; the list pull corrects the interval
    ensure(db, conv, group_id=change.group_id if change is not None else (named[0] if named else 0))
    if named is not None:
        titles.set_title(db, conv, named[1], e.conversation_seq)
    advance_head(db, conv, bytes(e.message_id), e.conversation_seq,
                 head_item(bytes(e.message_id), e.conversation_seq, e.sender_id, e.created_at_ms,
                           MESSAGE_TYPE_CONTROL, b"", bytes(e.body), NORMAL))
    if e.sender_id == user_id:  # our own CONTROL message (a leave, a recall) marks read, as the server's does
        move_read(db, conv, e.conversation_seq, True, touch)
    touch.add(conv)
    if change is None:
        return
    touch.membership.append(Membership(conv, change.group_id, e.conversation_seq, int(change.kind),
                                       tuple(change.users), change.actor_user_id))
    if user_id not in change.users:
        return
    if change.kind in (Kind.CREATED, Kind.JOINED):
        joined = 0 if change.kind == Kind.CREATED else e.conversation_seq - 1
        db.execute("UPDATE conversations SET joined_at = ?, left_at = 0 WHERE conversation_id = ?", (joined, conv))
    elif change.kind in (Kind.LEFT, Kind.REMOVED):
        db.execute("UPDATE conversations SET left_at = ? WHERE conversation_id = ?", (e.conversation_seq, conv))


def apply_entry(db: sqlite3.Connection, e: Any, touch: Touch) -> None:
    """A server SessionEntry (absolute values): snapshot, interval, read, head."""
    conv = bytes(e.conversation_id)
    ensure(db, conv, peer=e.peer_user_id, group_id=e.group_id)
    head_seq = e.last_message.conversation_seq if e.HasField("last_message") else 0
    db.execute("UPDATE conversations SET srv_read_seq = ?, srv_head_seq = ?, srv_unread = ?, srv_exact = ?,"
               " complete = 0, joined_at = ?, left_at = ?, updated_local_ms = ? WHERE conversation_id = ?",
               (e.read_conversation_seq, head_seq, e.unread, int(e.unread_exact), e.joined_at, e.left_at, _now(),
                conv))
    move_read(db, conv, e.read_conversation_seq, True, touch)
    if e.kind == CONVERSATION_KIND_GROUP:
        titles.set_title(db, conv, e.group_title, head_seq)
    if e.HasField("last_message"):
        m = e.last_message
        advance_head(db, conv, bytes(m.message_id), m.conversation_seq, m.SerializeToString())


def _count(db: sqlite3.Connection, user_id: int, conv: bytes, above: int, upto: Optional[int] = None) -> int:
    sql = ("SELECT count(*) FROM messages WHERE conversation_id = ? AND conversation_seq > ? AND sender_id != ?"
           " AND state = ? AND message_type != ?")
    args: list = [conv, above, user_id, NORMAL, MESSAGE_TYPE_CONTROL]
    if upto is not None:
        sql += " AND conversation_seq <= ?"
        args.append(upto)
    return db.execute(sql, args).fetchone()[0]


def recompute(db: sqlite3.Connection, user_id: int, conversation_id: bytes) -> Optional[Conversation]:
    """Derive unread (module docstring) and store it; the entry after the change."""
    conv = bytes(conversation_id)
    got = db.execute(f"SELECT {FIELDS} FROM conversations WHERE conversation_id = ?", (conv,)).fetchone()
    if got is None:
        return None
    (_, kind, _, _, joined, left, read, _, head, _, _, s_read, s_head, s_unread, s_exact, complete, _, _, _) = got
    group = kind == CONVERSATION_KIND_GROUP
    floor = joined if group else 0
    hi = left if group and left else None  # a leaver's interval ends at its LEFT / REMOVED message
    base = max(read, floor)
    if hi is not None:
        head = min(head, hi)
    snapshot = s_read is not None
    if snapshot and not complete and s_exact:
        s_base = max(s_read, floor)
        complete = int(_count(db, user_id, conv, s_base, s_head if hi is None else min(s_head, hi)) == s_unread)
    if head <= base:
        unread, exact = 0, True
    elif head - base > UNREAD_EXACT_WINDOW:
        unread, exact = UNREAD_EXACT_WINDOW, False
    elif not snapshot or complete:
        unread, exact = _count(db, user_id, conv, base, hi), True
    elif read == s_read and s_exact:
        unread, exact = s_unread + _count(db, user_id, conv, max(s_head, base), hi), True
    else:
        unread, exact = _count(db, user_id, conv, base, hi), False
    unread = min(unread, UNREAD_EXACT_WINDOW)
    db.execute("UPDATE conversations SET unread = ?, unread_exact = ?, complete = ? WHERE conversation_id = ?",
               (unread, int(exact), complete, conv))
    return get(db, conv)


def finish(db: sqlite3.Connection, user_id: int, touch: Touch, out: ApplyResult) -> ApplyResult:
    """Recompute every touched conversation and fold the changes into `out`."""
    for conv in touch.convs:
        entry = recompute(db, user_id, conv)
        if entry is not None:
            out.conversations.append(entry)
    out.reads.extend(touch.reads.items())
    out.membership.extend(touch.membership)
    return out


def after_mailbox(db: sqlite3.Connection, user_id: int, entries: Iterable[Any], out: ApplyResult) -> ApplyResult:
    """The list's part of one MAILBOX_BATCH (after apply.apply_mailbox_entries)."""
    touch = Touch()
    for msg in out.inserted + out.updated:
        note_message(db, user_id, msg, touch)
    for e in entries:
        if e.event_type != EventType.MESSAGE:
            note_control(db, user_id, e, touch)
    return finish(db, user_id, touch, out)


def after_ack(db: sqlite3.Connection, user_id: int, r: Any) -> ApplyResult:
    """A SEND_ACK (`r`: model.Resolved): the sent message is the head (from the pending
    row, before its mailbox entry arrives) and the conversation is read up to it."""
    touch = Touch()
    got = db.execute("SELECT recipient_user_id, message_type, custom_type, body FROM pending"
                     " WHERE client_message_id = ?", (r.client_message_id,)).fetchone()
    if got is not None:
        peer, message_type, custom_type, body = got
        ensure(db, r.conversation_id, peer=peer)
        advance_head(db, r.conversation_id, r.message_id, r.conversation_seq,
                     head_item(r.message_id, r.conversation_seq, user_id, r.created_at_ms, message_type,
                               bytes(custom_type), bytes(body), NORMAL))
        move_read(db, r.conversation_id, r.conversation_seq, True, touch)
    return finish(db, user_id, touch, ApplyResult([], []))


def after_history(db: sqlite3.Connection, user_id: int, out: ApplyResult) -> ApplyResult:
    """The list's part of one HISTORY_BATCH page (back-fill or REBUILD)."""
    touch = Touch()
    for msg in out.inserted + out.updated:
        note_message(db, user_id, msg, touch)
    return finish(db, user_id, touch, out)


def after_removal(db: sqlite3.Connection, user_id: int, conversation_id: bytes, out: ApplyResult) -> ApplyResult:
    """REBUILD removed rows: a removed head falls back to the newest stored message."""
    conv = bytes(conversation_id)
    if out.removed:
        marks = ",".join("?" * len(out.removed))
        gone = db.execute(f"SELECT 1 FROM conversations WHERE conversation_id = ? AND last_activity_id IN ({marks})",
                          (conv, *out.removed)).fetchone()
        if gone:
            db.execute("UPDATE conversations SET head_seq = 0, last_activity_id = NULL, head = NULL"
                       " WHERE conversation_id = ?", (conv,))
            newest = db.execute("SELECT message_id, conversation_seq, sender_id, created_at_ms, message_type,"
                                " custom_type, body, state FROM messages WHERE conversation_id = ?"
                                " ORDER BY conversation_seq DESC LIMIT 1", (conv,)).fetchone()
            if newest:
                advance_head(db, conv, newest[0], newest[1], head_item(*newest))
    touch = Touch()
    touch.add(conv)
    return finish(db, user_id, touch, out)


def _last(blob: Optional[bytes]) -> Optional[LastMessage]:
    if not blob:
        return None
    h = history_pb2.HistoryItem.FromString(bytes(blob))
    return LastMessage(bytes(h.message_id), h.conversation_seq, h.sender_id, h.created_at_ms, int(h.message_type),
                       bytes(h.custom_type), bytes(h.body), h.body_included, int(h.state))


def _entry(r: tuple) -> Conversation:
    (conv, kind, peer, group_id, joined, left, read, _, head_seq, last_id, head, *_, unread, exact, title) = r
    return Conversation(bytes(conv), kind, peer, group_id, read, unread, bool(exact), head_seq,
                        bytes(last_id) if last_id else None, _last(head), joined, left, title)


def get(db: sqlite3.Connection, conversation_id: bytes) -> Optional[Conversation]:
    """One entry, or None."""
    got = db.execute(f"SELECT {FIELDS} FROM conversations WHERE conversation_id = ?",
                     (bytes(conversation_id),)).fetchone()
    return _entry(got) if got else None


def listing(db: sqlite3.Connection, limit: Optional[int] = None) -> list[Conversation]:
    """Entries newest activity first (last_activity_id is time ordered); entries without
    any message yet (a chat just opened) after them, newest first."""
    sql = (f"SELECT {FIELDS} FROM conversations ORDER BY last_activity_id IS NULL, last_activity_id DESC,"
           " updated_local_ms DESC")
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return [_entry(r) for r in db.execute(sql)]


def unconfirmed_reads(db: sqlite3.Connection) -> list[tuple[bytes, int, int]]:
    """(conversation_id, read_seq, peer) whose read position the server does not hold
    yet (a MARK_READ that did not get its answer): sent again after the next list pull."""
    return [(bytes(c), r, p) for c, r, p in db.execute(
        "SELECT conversation_id, read_seq, peer_user_id FROM conversations WHERE read_seq > read_confirmed")]
