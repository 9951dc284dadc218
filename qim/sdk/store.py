"""LocalStore: the device's SQLite database (docs/design.md §9; seed 001 §2.9, seed 004 §7).

One file per (endpoint scope, tenant, user) at a stable path (`path_for`); `:memory:`
only when a test asks. Schema and migrations: qim/sdk/schema.py (version 2). The store
owns every durable device fact:

- meta: self identity (tenant, user_id, device_id), the store nonce (16 random bytes
  drawn at every open, so a store put back from an older copy never reissues a cmid;
  the machine it was opened on: qim/sdk/schema.py, decision 0081) and `next_ordinal`, the first ordinal not yet reserved. Ordinals
  are reserved in blocks under BEGIN IMMEDIATE (seed 004 "BEGIN IMMEDIATE 预留 ordinal
  号段"), so a crash loses at most the rest of a block and an ordinal is never handed
  out twice, even by two processes on one file. client_message_id =
  ids.client_message_id(store_nonce, device_id, ordinal): unique per local store for
  ever, also when a reinstalled device reuses its device_id.
- cursor: (lane, shard_epoch, last_applied_seq), moved only by a MAILBOX_BATCH (or the
  page an inline push stands for: docs/decisions/0156) and only in the same transaction
  as the batch's messages.
- messages: one row per message_id with its state (NORMAL, RECALLED, DELETED), only
  from MAILBOX_BATCH and HISTORY_BATCH, which carry whole bodies (qim/sdk/apply.py);
  from PUSH_EVENTS only as such a page (its cursor check passed).
- pending: one row per send the device has not seen committed yet (`state` pending →
  acked on SEND_ACK → committed once its own mailbox entry is applied; failed on a
  permanent ERROR, body kept so the app can show or resend the text).
- ops: the idempotency key (cmid) of each create_group / leave_group / recall, kept
  until the request has an answer, and the answer.

Every method is synchronous and must run on one thread: hosts call them through
`await store.run(store.method, ...)`, which uses the store's single-thread executor so
the event loop never waits for the disk. Errors: `StoreError` (a QimError) for a bad
identity, an unknown schema, a cursor regression or an incomplete body; sqlite3
errors inside a transaction roll it back and are re-raised as StoreError.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sqlite3
import time
from typing import Any, Callable, Iterable, Literal, Optional, TypeVar

from qim._core import ids
from qim.consts import CONVERSATION_KIND_DIRECT, U63_MAX
from qim.sdk import apply, conversations, extras
from qim.sdk.model import ApplyResult, PendingSend, Resolved, StoredMessage, StoreError, canonical_endpoint  # noqa: F401
from qim.sdk.schema import SCHEMA_VERSION, machine_id, open_db  # noqa: F401
from qim.sdk.store_lists import ListsMixin

T = TypeVar("T")
ORDINAL_BLOCK = 64
PENDING, ACKED, COMMITTED, FAILED = "pending", "acked", "committed", "failed"
OP_OPEN, OP_DONE, OP_FAILED = "open", "done", "failed"


class LocalStore(ListsMixin):
    """The SQLite device store. Open with `LocalStore.open(path, tenant, user_id)`.
    The conversation list and message pages: qim/sdk/store_lists.py."""

    def __init__(self, conn: sqlite3.Connection, tenant: int, user_id: int, device_id: int,
                 store_nonce: bytes) -> None:
        self._db = conn
        self.tenant = tenant
        self.user_id = user_id
        self.device_id = device_id
        self.store_nonce = store_nonce  # 16 bytes, drawn when this open began (decision 0081)
        self._block_next = 0  # next ordinal of the reserved in-memory block
        self._block_end = 0   # exclusive end of the block
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="qim-localstore")

    # --- lifecycle -----------------------------------------------------------------
    @staticmethod
    def path_for(base_dir: str, deployment: str, tenant: int, user_id: int) -> str:
        """Stable file path: base_dir/<scope>/<tenant hex32>/<user>.sqlite3. The scope is
        ids.endpoint_scope of the deployment: a gateway endpoint in canonical form (the
        first of the app's gateways), or a deployment name (docs/decisions/0082); tokens
        never enter the path (seed 004 §7)."""
        try:
            key = canonical_endpoint(deployment)
        except ValueError:
            if not deployment.strip():
                raise ValueError("the deployment name is empty") from None
            key = "deployment:" + deployment.strip()
        return os.path.join(base_dir, ids.endpoint_scope(key), f"{tenant:032x}", f"{user_id}.sqlite3")

    @classmethod
    def open(cls, path: str, tenant: int, user_id: int, device_id: Optional[int] = None) -> "LocalStore":
        """Open, create or migrate (schema 1 -> 5) the store. A new store takes
        `device_id` or a random non-zero 63-bit one; every open draws a new nonce. An
        existing store must match tenant/user (and device_id if given), else StoreError;
        one copied from another machine becomes a new device, or StoreError when
        `device_id` is given (qim/sdk/schema.py, decision 0081)."""
        if not (0 < user_id <= U63_MAX) or not (0 <= tenant < 1 << 128):
            raise StoreError("tenant must be u128 and user_id a non-zero u64")
        if path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
        try:
            conn.execute("PRAGMA journal_mode=WAL" if path != ":memory:" else "PRAGMA journal_mode=MEMORY")
            conn.execute("PRAGMA synchronous=FULL")  # a pending row must survive a crash
            device, nonce = open_db(conn, tenant, user_id, device_id, None if path == ":memory:" else machine_id())
        except sqlite3.Error as exc:
            conn.close()
            raise StoreError(f"cannot open the store: {exc.__class__.__name__}: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        return cls(conn, tenant, user_id, device, nonce)

    def close(self) -> None:
        """Close the database and the executor (pending work finishes first)."""
        self._executor.shutdown(wait=True)
        self._db.close()

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(*args)` (a method of this store) on the store thread."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _tx(self) -> "_Tx":
        return _Tx(self._db)

    # --- ordinals and pending ------------------------------------------------------
    def reserve_ordinal(self) -> int:
        """The next never-used ordinal; takes a new block of ORDINAL_BLOCK under BEGIN
        IMMEDIATE when the in-memory block is spent. StoreError when u64 runs out."""
        if self._block_next >= self._block_end:
            with self._tx():
                (start,) = self._db.execute("SELECT next_ordinal FROM meta").fetchone()
                if start + ORDINAL_BLOCK > U63_MAX:  # SQLite INTEGER is signed: never wrap
                    raise StoreError("ordinal space exhausted")
                self._db.execute("UPDATE meta SET next_ordinal = ?", (start + ORDINAL_BLOCK,))
            self._block_next, self._block_end = start, start + ORDINAL_BLOCK
        ordinal = self._block_next
        self._block_next += 1
        return ordinal

    def cmid_for(self, ordinal: int) -> bytes:
        """The client_message_id of `ordinal` in this store (docs/design.md §3, cmid v2)."""
        return ids.client_message_id(self.store_nonce, self.device_id, ordinal)

    def add_pending(self, conversation_id: bytes, recipient_user_id: int, message_type: int,
                    custom_type: bytes, body: bytes, now_ms: Optional[int] = None,
                    send_extras: bytes = b"", cmid: bytes = b"") -> PendingSend:
        """Reserve a cmid and store the local_pending row durably before anything is sent,
        with its reply target and mentions (`send_extras`, qim/sdk/extras.py). The caller
        validated the send (qim/sdk/validate.py). `cmid`: one a media send reserved
        before its upload (qim/sdk/media_outbox.py); the row's ordinal is new either way."""
        ordinal = self.reserve_ordinal()
        row = PendingSend(cmid or self.cmid_for(ordinal), ordinal, bytes(conversation_id),
                          recipient_user_id, message_type, bytes(custom_type), bytes(body),
                          now_ms if now_ms is not None else int(time.time() * 1000), PENDING, send_extras)
        with self._tx():
            conversations.ensure(self._db, row.conversation_id, peer=recipient_user_id)
            self._db.execute("INSERT INTO pending (client_message_id, ordinal, conversation_id, recipient_user_id,"
                             " message_type, custom_type, body, created_local_ms, state)"
                             " VALUES (?,?,?,?,?,?,?,?,?)",
                             (row.client_message_id, ordinal, row.conversation_id, recipient_user_id,
                              message_type, row.custom_type, row.body, row.created_local_ms, PENDING))
            extras.put_pending(self._db, row.client_message_id, send_extras)
        return row

    def pending_sends(self, states: Iterable[str] = (PENDING,)) -> list[PendingSend]:
        """Pending rows in the given states, oldest ordinal first."""
        states = tuple(states)
        marks = ",".join("?" * len(states))
        rows = self._db.execute(
            "SELECT client_message_id, ordinal, conversation_id, recipient_user_id, message_type, custom_type,"
            f" body, created_local_ms, state, {extras.PENDING_COLUMN} FROM pending WHERE state IN ({marks})"
            " ORDER BY ordinal", states)
        return [PendingSend(*r) for r in rows]

    def pending_state(self, client_message_id: bytes) -> Optional[str]:
        """State of one pending row, None when unknown."""
        row = self._db.execute("SELECT state FROM pending WHERE client_message_id = ?",
                               (client_message_id,)).fetchone()
        return row[0] if row else None

    def mark_acked(self, r: Resolved) -> ApplyResult:
        """Record a SEND_ACK; a row already committed stays committed. Sending marks the
        conversation read up to the message and makes it the head: the list entries
        changed are in the result."""
        with self._tx():
            cur = self._db.execute("UPDATE pending SET state = ?, message_id = ?, conversation_seq = ?,"
                                   " created_at_ms = ? WHERE client_message_id = ? AND state IN (?, ?)",
                                   (ACKED, r.message_id, r.conversation_seq, r.created_at_ms, r.client_message_id,
                                    PENDING, FAILED))
            if not cur.rowcount:
                return ApplyResult([], [])
            if r.body is not None:  # moderation replaced the body: the row shows what was committed (0126)
                self._db.execute("UPDATE pending SET body = ? WHERE client_message_id = ?", (r.body, r.client_message_id))
            return conversations.after_ack(self._db, self.user_id, r)

    def mark_failed(self, client_message_id: bytes) -> bool:
        """A permanent ERROR: never resend this row; its body stays for the app. True
        when the row was pending (False: already resolved)."""
        with self._tx():
            cur = self._db.execute("UPDATE pending SET state = ? WHERE client_message_id = ? AND state = ?",
                                   (FAILED, client_message_id, PENDING))
        return bool(cur.rowcount)

    # --- idempotency keys of other mutating requests -----------
    def op_begin(self, kind: str, key: bytes, replay_answer: bool) -> tuple[bytes, Optional[bytes]]:
        """The cmid for operation (kind, key) and its stored answer, if any. An open
        operation (no answer yet) keeps its cmid, so a retry is the same request. An
        answered one returns (cmid, reply) when `replay_answer` (operations that can
        only happen once, e.g. creating one group), else a new operation starts."""
        got = self._db.execute("SELECT cmid, state, reply FROM ops WHERE kind = ? AND key = ?",
                               (kind, key)).fetchone()
        if got is not None:
            cmid, state, reply = got
            if state == OP_OPEN:
                return bytes(cmid), None
            if state == OP_DONE and replay_answer:
                return bytes(cmid), bytes(reply)
        cmid = self.cmid_for(self.reserve_ordinal())  # before the transaction: it may take a block
        with self._tx():
            self._db.execute("DELETE FROM ops WHERE kind = ? AND key = ?", (kind, key))
            self._db.execute("INSERT INTO ops (kind, key, cmid, state, created_local_ms) VALUES (?,?,?,?,?)",
                             (kind, key, cmid, OP_OPEN, int(time.time() * 1000)))
        return cmid, None

    def op_end(self, kind: str, key: bytes, cmid: bytes, reply: Optional[bytes]) -> None:
        """Record the answer of an open operation: its reply (done) or None (a permanent
        error: the next call is a new operation)."""
        with self._tx():
            self._db.execute("UPDATE ops SET state = ?, reply = ? WHERE kind = ? AND key = ? AND cmid = ?",
                             (OP_DONE if reply is not None else OP_FAILED, reply, kind, key, cmid))

    # --- mailbox -------------------------------------------------------------------
    def cursor(self) -> Optional[tuple[int, int, int]]:
        """(lane, shard_epoch, last_applied_seq), or None before the first batch."""
        return self._db.execute("SELECT lane, shard_epoch, last_applied_seq FROM cursor").fetchone()

    def apply_mailbox_batch(self, entries: Iterable[Any], next_cursor: int, lane: int,
                            shard_epoch: int) -> ApplyResult:
        """Apply a MAILBOX_BATCH's entries (idempotent on message_id; recall/delete
        notices change the target's state), resolve pending rows whose cmid is in our
        own entries, and set the cursor, all in ONE transaction (docs/design.md §9): any
        failure leaves messages, pending and cursor as they were. StoreError on a
        cursor regression within one (lane, shard_epoch)."""
        entries = list(entries)
        with self._tx():
            result = apply.apply_mailbox_entries(self._db, self.user_id, entries)
            conversations.after_mailbox(self._db, self.user_id, entries, result)
            self._write_cursor(next_cursor, lane, shard_epoch)
        return result

    def apply_history(self, conversation_id: bytes, items: Iterable[Any]) -> ApplyResult:
        """Apply one HISTORY_BATCH page of a conversation (REBUILD) without touching the
        cursor; StoreError (nothing applied) when a NORMAL item lacks its body."""
        with self._tx():
            result = apply.apply_history_items(self._db, self.user_id, conversation_id, items)
            return conversations.after_history(self._db, self.user_id, result)

    def remove_absent(self, conversation_id: bytes, above_seq: int, seen: set[bytes]) -> ApplyResult:
        """Delete stored rows of the conversation above `above_seq` that a complete history
        walk did not return (outside every member interval); their ids in `removed`."""
        with self._tx():
            result = ApplyResult([], [], [], apply.remove_absent(self._db, conversation_id, above_seq, seen))
            return conversations.after_removal(self._db, self.user_id, conversation_id, result)

    def rebuild_needed(self) -> bool:
        """True when the next connect must REBUILD first (set by the schema migration)."""
        return bool(self._db.execute("SELECT rebuild_needed FROM meta").fetchone()[0])

    def reset_cursor(self) -> None:
        """After a REBUILD: drop the cursor (the next pull starts from 0, which never
        expires) and clear rebuild_needed; messages stay."""
        with self._tx():
            self._db.execute("DELETE FROM cursor")
            self._db.execute("UPDATE meta SET rebuild_needed = 0")

    def _write_cursor(self, next_cursor: int, lane: int, shard_epoch: int) -> None:
        old = self.cursor()
        if old is not None and (old[0], old[1]) == (lane, shard_epoch) and next_cursor < old[2]:
            raise StoreError("mailbox cursor would move backwards")
        self._db.execute("INSERT INTO cursor VALUES (1, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
                         " lane = excluded.lane, shard_epoch = excluded.shard_epoch,"
                         " last_applied_seq = excluded.last_applied_seq", (lane, shard_epoch, next_cursor))

    # --- reads ---------------------------------------------------------------------
    def messages(self, conversation_id: Optional[bytes] = None) -> list[StoredMessage]:
        """Stored messages ordered by (conversation_id, conversation_seq)."""
        sql = f"SELECT {apply.READ_COLUMNS} FROM messages"
        if conversation_id is None:
            rows = self._db.execute(sql + " ORDER BY conversation_id, conversation_seq")
        else:
            rows = self._db.execute(sql + " WHERE conversation_id = ? ORDER BY conversation_seq", (conversation_id,))
        return [StoredMessage(*r) for r in rows]

    def has_message(self, message_id: bytes) -> bool:
        """True when a message with this message_id is stored."""
        return self._db.execute("SELECT 1 FROM messages WHERE message_id = ?", (message_id,)).fetchone() is not None

    def conversations_held(self) -> dict[bytes, tuple[int, int]]:
        """conversation_id -> (lowest stored conversation_seq, a peer user id or 0): what
        REBUILD must check against history. The peer of a direct conversation is another
        sender found in its rows, else a recipient of our own sends (0 for groups)."""
        out = {}
        for conv, low in self._db.execute("SELECT conversation_id, min(conversation_seq) FROM messages"
                                          " GROUP BY conversation_id").fetchall():
            if ids.conversation_kind(conv) != CONVERSATION_KIND_DIRECT:
                out[bytes(conv)] = (low, 0)  # groups are authorised by membership, not by a peer
                continue
            peer = self._db.execute(
                "SELECT sender_id FROM messages WHERE conversation_id = ? AND sender_id != ? LIMIT 1",
                (conv, self.user_id)).fetchone() or self._db.execute(
                "SELECT recipient_user_id FROM pending WHERE conversation_id = ? AND recipient_user_id != 0"
                " LIMIT 1", (conv,)).fetchone()
            out[bytes(conv)] = (low, peer[0] if peer else 0)
        return out


class _Tx:
    """BEGIN IMMEDIATE … COMMIT, ROLLBACK on any exception (sqlite3 errors → StoreError)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> Literal[False]:
        if exc_type is None:
            self._db.execute("COMMIT")
            return False
        self._db.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error):
            raise StoreError(f"transaction failed: {exc.__class__.__name__}: {exc}") from exc
        return False
