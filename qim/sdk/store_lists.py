"""LocalStore methods for the conversation list and message pages.

A mixin of LocalStore (qim/sdk/store.py): same rules — synchronous, run on the store
thread through `await store.run(store.method, ...)`, every write one transaction whose
list changes come back in an ApplyResult for the runtime to tell the app after the
commit. The list logic itself is qim/sdk/conversations.py.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from qim.consts import CONVERSATION_KIND_GROUP
from qim.sdk import apply, conversations, extras, titles
from qim.sdk.conversations import Touch
from qim.sdk.model import ApplyResult, Conversation, PendingSend, StoredMessage

_PENDING_COLUMNS = ("client_message_id, ordinal, conversation_id, recipient_user_id, message_type, custom_type,"
                    " body, created_local_ms, state, " + extras.PENDING_COLUMN)


class ListsMixin:
    """Conversation list and message pages; needs `_db`, `_tx()` and `user_id`."""

    _db: Any
    user_id: int

    def _tx(self) -> Any:  # provided by LocalStore
        raise NotImplementedError

    # --- the list ------------------------------------------------------------------
    def conversations(self, limit: Optional[int] = None) -> list[Conversation]:
        """The conversation list, newest activity first."""
        return conversations.listing(self._db, limit)

    def conversation(self, conversation_id: bytes) -> Optional[Conversation]:
        """One list entry, or None when the store knows nothing of it."""
        return conversations.get(self._db, conversation_id)

    def open_conversation(self, conversation_id: bytes, peer_user_id: int = 0, group_id: int = 0) -> ApplyResult:
        """Make sure the conversation has a list entry (a chat the user starts)."""
        with self._tx():
            conversations.ensure(self._db, conversation_id, peer=peer_user_id, group_id=group_id)
            touch = Touch()
            touch.add(conversation_id)
            return conversations.finish(self._db, self.user_id, touch, ApplyResult([], []))

    def apply_sessions(self, entries: Iterable[Any]) -> ApplyResult:
        """SessionEntry values from SESSION_LIST_BATCH or SESSION_DELTA (absolute)."""
        with self._tx():
            touch = Touch()
            for e in entries:
                conversations.apply_entry(self._db, e, touch)
            return conversations.finish(self._db, self.user_id, touch, ApplyResult([], []))

    def move_read(self, conversation_id: bytes, seq: int, confirmed: bool) -> ApplyResult:
        """Read position forward to `seq` (MARK_READ, MARK_READ_OK, READ_SYNC);
        `confirmed`: the server holds it already."""
        with self._tx():
            conversations.ensure(self._db, conversation_id)
            touch = Touch()
            conversations.move_read(self._db, conversation_id, seq, confirmed, touch)
            return conversations.finish(self._db, self.user_id, touch, ApplyResult([], []))

    def unconfirmed_reads(self) -> list[tuple[bytes, int, int]]:
        """(conversation_id, read_seq, peer) the server may not hold yet."""
        return conversations.unconfirmed_reads(self._db)

    def note_group(self, conversation_id: bytes, group_id: int, seq: int, member: bool,
                   title: str = "") -> ApplyResult:
        """A GroupOk of this user's own create (member, joined at 0; named `title`) or
        leave (left at seq); its CONTROL message at `seq` is our own, so it marks the group
        read up to it (as the server's registration does: conversations.py)."""
        with self._tx():
            conversations.ensure(self._db, conversation_id, group_id=group_id)
            if title:
                titles.set_title(self._db, conversation_id, title, seq)
            if member:
                self._db.execute("UPDATE conversations SET joined_at = 0, left_at = 0 WHERE conversation_id = ?",
                                 (conversation_id,))
            else:
                self._db.execute("UPDATE conversations SET left_at = ? WHERE conversation_id = ?",
                                 (seq, conversation_id))
            touch = Touch()
            conversations.move_read(self._db, conversation_id, seq, True, touch)
            touch.add(conversation_id)
            return conversations.finish(self._db, self.user_id, touch, ApplyResult([], []))

    def mark_state(self, message_id: bytes, state: int) -> ApplyResult:
        """A RECALL_OK of our own recall: the stored copy takes the state at once (the
        mailbox notice that follows finds nothing left to change)."""
        with self._tx():
            out = ApplyResult([], [])
            changed = apply.set_state(self._db, message_id, state)
            touch = Touch()
            if changed is not None:
                out.updated.append(changed)
                conversations.note_message(self._db, self.user_id, changed, touch)
            out.updated.extend(apply.unquoted(self._db, message_id, state))  # their quotes lose its text (0134)
            return conversations.finish(self._db, self.user_id, touch, out)

    def note_title(self, conversation_id: bytes, group_id: int, title: str, seq: int) -> ApplyResult:
        """A GroupOk of this user's own SET_GROUP_TITLE: the title as of its seq."""
        with self._tx():
            conversations.ensure(self._db, conversation_id, group_id=group_id)
            titles.set_title(self._db, conversation_id, title, seq)
            touch = Touch()
            touch.add(conversation_id)
            return conversations.finish(self._db, self.user_id, touch, ApplyResult([], []))

    # --- display names (docs/sdk.md "Names") ---------------------------------------
    def profiles(self, user_ids: Iterable[int]) -> dict[int, str]:
        """The display names the store holds for these users ("" when the user gave none;
        absent when never asked)."""
        wanted = list(dict.fromkeys(int(u) for u in user_ids))
        out: dict[int, str] = {}
        for i in range(0, len(wanted), 500):  # SQLite's bound-parameter limit
            chunk = wanted[i:i + 500]
            marks = ",".join("?" * len(chunk))
            out.update(self._db.execute(f"SELECT user_id, display_name FROM profiles WHERE user_id IN ({marks})",
                                        chunk).fetchall())
        return out

    def store_profiles(self, names: Iterable[tuple[int, str]], now_ms: int) -> None:
        """Keep display names as PULL_PROFILES answered (the newest answer wins)."""
        with self._tx():
            self._db.executemany("INSERT INTO profiles (user_id, display_name, fetched_local_ms) VALUES (?,?,?)"
                                 " ON CONFLICT (user_id) DO UPDATE SET display_name = excluded.display_name,"
                                 " fetched_local_ms = excluded.fetched_local_ms",
                                 [(int(u), n, now_ms) for u, n in names])

    # --- message pages -------------------------------------------------------------
    def messages_before(self, conversation_id: bytes, before_seq: int = 0, limit: int = 50) -> list[StoredMessage]:
        """The `limit` newest stored messages with conversation_seq < before_seq (0: no
        bound), in conversation_seq order."""
        sql = f"SELECT {apply.READ_COLUMNS} FROM messages WHERE conversation_id = ?"
        args: list = [bytes(conversation_id)]
        if before_seq:
            sql += " AND conversation_seq < ?"
            args.append(before_seq)
        rows = self._db.execute(sql + " ORDER BY conversation_seq DESC LIMIT ?", (*args, limit)).fetchall()
        return [StoredMessage(*r) for r in reversed(rows)]

    def oldest_reached(self, conversation_id: bytes) -> bool:
        """True once history had nothing older than the oldest stored message."""
        got = self._db.execute("SELECT oldest_reached FROM conversations WHERE conversation_id = ?",
                               (bytes(conversation_id),)).fetchone()
        return bool(got and got[0])

    def set_oldest_reached(self, conversation_id: bytes) -> None:
        """History back-fill reached the first message of the conversation: stop asking."""
        with self._tx():
            conversations.ensure(self._db, conversation_id)
            self._db.execute("UPDATE conversations SET oldest_reached = 1 WHERE conversation_id = ?",
                             (bytes(conversation_id),))

    def unsent(self, conversation_id: Optional[bytes] = None) -> list[PendingSend]:
        """Sends not yet seen committed (state pending or acked) and failed ones, oldest
        first: what an app shows as "sending" or "failed" beside the stored messages."""
        sql = f"SELECT {_PENDING_COLUMNS} FROM pending WHERE state IN ('pending', 'acked', 'failed')"
        args: tuple = ()
        if conversation_id is not None:
            sql += " AND conversation_id = ?"
            args = (bytes(conversation_id),)
        return [PendingSend(*r) for r in self._db.execute(sql + " ORDER BY ordinal", args)]

    def peer_of(self, conversation_id: bytes) -> int:
        """The other participant of a direct conversation as far as the store knows (0
        for groups or when unknown)."""
        entry = conversations.get(self._db, conversation_id)
        if entry is not None and (entry.kind == CONVERSATION_KIND_GROUP or entry.peer_user_id):
            return entry.peer_user_id
        return 0
