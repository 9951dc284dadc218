"""LocalStore: the device's SQLite database (DESIGN.md §9; seed 001 §2.9, seed 004 §7).

One file per (endpoint scope, tenant, user) at a stable path (`path_for`); `:memory:`
only when a test asks. The store owns every durable device fact:

- meta: self identity (tenant, user_id, device_id) and `next_ordinal`, the first
  ordinal not yet reserved. Ordinals are reserved in blocks under BEGIN IMMEDIATE
  (seed 004 "BEGIN IMMEDIATE 预留 ordinal 号段"), so a crash loses at most the rest of a
  block and an ordinal is never handed out twice, even by two processes on one file.
  client_message_id = ids.client_message_id(device_id, ordinal).
- cursor: (lane, shard_epoch, last_applied_seq), moved only by a MAILBOX_BATCH and only
  in the same transaction as the batch's messages.
- messages: one row per message_id (idempotent); PUSH_EVENTS land here too but never
  touch the cursor.
- pending: one row per send the device has not seen committed yet (`state` pending →
  acked on SEND_ACK → committed once its own mailbox entry is applied; failed on a
  permanent ERROR).

Every method is synchronous and must run on one thread: hosts call them through
`await store.run(store.method, ...)`, which uses the store's single-thread executor so
the event loop never waits for the disk. Errors: `StoreError` (a QimError) for a bad
identity or a cursor regression; sqlite3 errors inside a transaction roll it back and
are re-raised as StoreError.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import secrets
import sqlite3
import time
from dataclasses import astuple
from typing import Any, Callable, Iterable, Optional, TypeVar

from google.protobuf.message import DecodeError

from qim._core import ids
from qim.consts import U63_MAX
from qim.proto.v1 import message_pb2
from qim.protocol import EventType
from qim.sdk.model import (ApplyResult, PendingSend, Resolved, StoredMessage, StoreError,  # noqa: F401
                           canonical_endpoint)

logger = logging.getLogger(__name__)

T = TypeVar("T")
SCHEMA_VERSION = 1
ORDINAL_BLOCK = 64
PENDING, ACKED, COMMITTED, FAILED = "pending", "acked", "committed", "failed"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  schema_version INTEGER NOT NULL,
  tenant_hex TEXT NOT NULL,
  user_id INTEGER NOT NULL,
  device_id INTEGER NOT NULL,
  next_ordinal INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS cursor (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  lane INTEGER NOT NULL, shard_epoch INTEGER NOT NULL, last_applied_seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
  message_id BLOB PRIMARY KEY CHECK (length(message_id) = 16),
  conversation_id BLOB NOT NULL CHECK (length(conversation_id) = 16),
  conversation_seq INTEGER NOT NULL,
  sender_id INTEGER NOT NULL,
  created_at_ms INTEGER NOT NULL,
  message_type INTEGER NOT NULL,
  custom_type BLOB NOT NULL,
  body BLOB NOT NULL,
  client_message_id BLOB,
  mailbox_seq INTEGER NOT NULL,
  source TEXT NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS messages_by_conv ON messages (conversation_id, conversation_seq);
CREATE TABLE IF NOT EXISTS pending (
  client_message_id BLOB PRIMARY KEY CHECK (length(client_message_id) = 16),
  ordinal INTEGER NOT NULL UNIQUE,
  conversation_id BLOB NOT NULL CHECK (length(conversation_id) = 16),
  recipient_user_id INTEGER NOT NULL,
  message_type INTEGER NOT NULL,
  custom_type BLOB NOT NULL,
  body BLOB NOT NULL,
  created_local_ms INTEGER NOT NULL,
  state TEXT NOT NULL,
  message_id BLOB, conversation_seq INTEGER, created_at_ms INTEGER) WITHOUT ROWID;
"""


class LocalStore:
    """The SQLite device store. Open with `LocalStore.open(path, tenant, user_id)`."""

    def __init__(self, conn: sqlite3.Connection, tenant: int, user_id: int, device_id: int) -> None:
        self._db = conn
        self.tenant = tenant
        self.user_id = user_id
        self.device_id = device_id
        self._block_next = 0  # next ordinal of the reserved in-memory block
        self._block_end = 0   # exclusive end of the block
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="qim-localstore")

    # --- lifecycle -----------------------------------------------------------------
    @staticmethod
    def path_for(base_dir: str, endpoint: str, tenant: int, user_id: int) -> str:
        """Stable file path: base_dir/<endpoint scope>/<tenant hex32>/<user>.sqlite3.

        The scope is ids.endpoint_scope(canonical_endpoint(endpoint)); tokens never enter
        the path (seed 004 §7)."""
        scope = ids.endpoint_scope(canonical_endpoint(endpoint))
        return os.path.join(base_dir, scope, f"{tenant:032x}", f"{user_id}.sqlite3")

    @classmethod
    def open(cls, path: str, tenant: int, user_id: int, device_id: Optional[int] = None) -> "LocalStore":
        """Open or create the store. A new store takes `device_id` or a random non-zero
        63-bit one; an existing store must match tenant/user (and device_id if given),
        else StoreError."""
        if not (0 < user_id <= U63_MAX) or not (0 <= tenant < 1 << 128):
            raise StoreError("tenant must be u128 and user_id a non-zero u64")
        if path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
        conn.execute("PRAGMA journal_mode=WAL" if path != ":memory:" else "PRAGMA journal_mode=MEMORY")
        conn.execute("PRAGMA synchronous=FULL")  # a pending row must survive a crash
        conn.executescript(_SCHEMA)
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute("SELECT schema_version, tenant_hex, user_id, device_id FROM meta").fetchone()
            if row is None:
                device = device_id or (secrets.randbits(63) or 1)
                conn.execute("INSERT INTO meta VALUES (1, ?, ?, ?, ?, 0)",
                             (SCHEMA_VERSION, f"{tenant:032x}", user_id, device))
            else:
                version, tenant_hex, stored_user, device = row
                if version != SCHEMA_VERSION or tenant_hex != f"{tenant:032x}" or stored_user != user_id:
                    raise StoreError("store belongs to another identity or schema")
                if device_id is not None and device_id != device:
                    raise StoreError("store belongs to another device")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            conn.close()
            raise
        return cls(conn, tenant, user_id, device)

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

    def add_pending(self, conversation_id: bytes, recipient_user_id: int, message_type: int,
                    custom_type: bytes, body: bytes, now_ms: Optional[int] = None) -> PendingSend:
        """Reserve a cmid and store the local_pending row durably before anything is sent."""
        ordinal = self.reserve_ordinal()
        row = PendingSend(ids.client_message_id(self.device_id, ordinal), ordinal, bytes(conversation_id),
                          recipient_user_id, message_type, bytes(custom_type), bytes(body),
                          now_ms if now_ms is not None else int(time.time() * 1000), PENDING)
        with self._tx():
            self._db.execute("INSERT INTO pending (client_message_id, ordinal, conversation_id, recipient_user_id,"
                             " message_type, custom_type, body, created_local_ms, state)"
                             " VALUES (?,?,?,?,?,?,?,?,?)",
                             (row.client_message_id, ordinal, row.conversation_id, recipient_user_id,
                              message_type, row.custom_type, row.body, row.created_local_ms, PENDING))
        return row

    def pending_sends(self, states: Iterable[str] = (PENDING,)) -> list[PendingSend]:
        """Pending rows in the given states, oldest ordinal first."""
        states = tuple(states)
        marks = ",".join("?" * len(states))
        rows = self._db.execute(
            "SELECT client_message_id, ordinal, conversation_id, recipient_user_id, message_type, custom_type,"
            f" body, created_local_ms, state FROM pending WHERE state IN ({marks}) ORDER BY ordinal", states)
        return [PendingSend(*r) for r in rows]

    def pending_state(self, client_message_id: bytes) -> Optional[str]:
        """State of one pending row, None when unknown."""
        row = self._db.execute("SELECT state FROM pending WHERE client_message_id = ?",
                               (client_message_id,)).fetchone()
        return row[0] if row else None

    def mark_acked(self, r: Resolved) -> None:
        """Record a SEND_ACK; a row already committed stays committed."""
        with self._tx():
            self._db.execute("UPDATE pending SET state = ?, message_id = ?, conversation_seq = ?, created_at_ms = ?"
                             " WHERE client_message_id = ? AND state IN (?, ?)",
                             (ACKED, r.message_id, r.conversation_seq, r.created_at_ms, r.client_message_id,
                              PENDING, FAILED))

    def mark_failed(self, client_message_id: bytes) -> None:
        """A permanent ERROR: never resend this row."""
        with self._tx():
            self._db.execute("UPDATE pending SET state = ? WHERE client_message_id = ? AND state = ?",
                             (FAILED, client_message_id, PENDING))

    # --- mailbox -------------------------------------------------------------------
    def cursor(self) -> Optional[tuple[int, int, int]]:
        """(lane, shard_epoch, last_applied_seq), or None before the first batch."""
        return self._db.execute("SELECT lane, shard_epoch, last_applied_seq FROM cursor").fetchone()

    def apply_mailbox_batch(self, entries: Iterable[Any], next_cursor: int, lane: int,
                            shard_epoch: int) -> ApplyResult:
        """Insert a MAILBOX_BATCH's entries (idempotent on message_id), resolve pending
        rows whose cmid is in our own entries, and set the cursor, all in ONE
        transaction (DESIGN.md §9): any failure leaves messages, pending and cursor as
        they were. StoreError on a cursor regression within one (lane, shard_epoch)."""
        with self._tx():
            result = self._apply_entries(entries, "mailbox")
            self._write_cursor(next_cursor, lane, shard_epoch)
        return result

    def apply_push(self, entries: Iterable[Any]) -> ApplyResult:
        """Store PUSH_EVENTS entries (idempotent) without touching the cursor."""
        with self._tx():
            return self._apply_entries(entries, "push")

    def reset_cursor(self) -> None:
        """Drop the cursor (CURSOR_EXPIRED): the next pull starts from 0; messages stay."""
        with self._tx():
            self._db.execute("DELETE FROM cursor")

    def _apply_entries(self, entries: Iterable[Any], source: str) -> ApplyResult:
        inserted: list[StoredMessage] = []
        resolved: list[Resolved] = []
        for e in entries:
            if e.event_type in (EventType.RECALL, EventType.DELETE):
                # the CONTROL notice of a recall/delete: the local copy loses its body too
                try:
                    target = message_pb2.ControlEvent.FromString(bytes(e.body)).state_change.message_id
                except DecodeError:
                    # a server bug must not wedge the cursor on this entry forever
                    logger.warning("unreadable recall/delete notice at mailbox_seq %d", e.mailbox_seq)
                    target = b""
                self._db.execute("UPDATE messages SET body = x'' WHERE message_id = ?", (target,))
            if e.event_type != EventType.MESSAGE:
                continue  # MEMBERSHIP and the notices themselves are not stored as messages
            cmid = bytes(e.client_message_id) or None
            msg = StoredMessage(bytes(e.message_id), bytes(e.conversation_id), e.conversation_seq, e.sender_id,
                                e.created_at_ms, int(e.message_type), bytes(e.custom_type), bytes(e.body),
                                cmid, e.mailbox_seq)
            # ON CONFLICT, not OR IGNORE: OR IGNORE would also swallow CHECK/NOT NULL
            # violations and let the cursor pass an entry that was never stored.
            cur = self._db.execute("INSERT INTO messages VALUES (?,?,?,?,?,?,?,?,?,?,?)"
                                   " ON CONFLICT (message_id) DO NOTHING", (*astuple(msg), source))
            if cur.rowcount:
                inserted.append(msg)
            if cmid is not None and e.sender_id == self.user_id:
                cur = self._db.execute(
                    "UPDATE pending SET state = ?, message_id = ?, conversation_seq = ?, created_at_ms = ?"
                    " WHERE client_message_id = ? AND state != ?",
                    (COMMITTED, msg.message_id, msg.conversation_seq, msg.created_at_ms, cmid, COMMITTED))
                if cur.rowcount:
                    resolved.append(Resolved(cmid, msg.message_id, msg.conversation_id, msg.conversation_seq,
                                             msg.created_at_ms))
        return ApplyResult(inserted, resolved)

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
        sql = ("SELECT message_id, conversation_id, conversation_seq, sender_id, created_at_ms, message_type,"
               " custom_type, body, client_message_id, mailbox_seq FROM messages")
        if conversation_id is None:
            rows = self._db.execute(sql + " ORDER BY conversation_id, conversation_seq")
        else:
            rows = self._db.execute(sql + " WHERE conversation_id = ? ORDER BY conversation_seq", (conversation_id,))
        return [StoredMessage(*r) for r in rows]

    def has_message(self, message_id: bytes) -> bool:
        return self._db.execute("SELECT 1 FROM messages WHERE message_id = ?", (message_id,)).fetchone() is not None


class _Tx:
    """BEGIN IMMEDIATE … COMMIT, ROLLBACK on any exception (sqlite3 errors → StoreError)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self._db.execute("COMMIT")
            return False
        self._db.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error):
            raise StoreError(f"transaction failed: {exc.__class__.__name__}: {exc}") from exc
        return False
