"""The LocalStore's SQLite schema (version 5) and the migrations from versions 1 to 4.

Version 2 adds:
- meta.store_nonce: 16 random bytes drawn when the store is created; part of every
  client_message_id derivation (docs/design.md §3, §9: unique per local store for ever).
- meta.rebuild_needed: 1 when the next connect must REBUILD before pulling (set by
  the migration when version-1 rows may disagree with the server).
- messages.state: MessageState (0 NORMAL, 1 RECALLED, 2 DELETED), so an app can show
  a recalled or deleted message as such.
- ops: idempotency keys of mutating requests other than sends (create_group,
  leave_group, recall), kept until the request has an answer.

Migration 1 -> 2 (in one transaction, on open): add the columns and the table, draw the
nonce, and mark a REBUILD when any version-1 row has an empty body: version 1 stored
PUSH_EVENTS entries whose body was only referenced as empty and
cleared recalled bodies without a state; REBUILD asks history what each one really is.
Pending rows keep their version-1 cmids (already on the wire); new cmids use v2.

Version 3 adds `conversations`: the device's conversation list (kind, peer
or group, member interval, read position, head, the last server snapshot of the entry
and the unread count derived from both; qim/sdk/conversations.py). Migration 2 -> 3
creates the table; the rows are filled from the stored messages (their unread is a
local count until the next session-list pull brings the server's values).

Version 4 (names a person can read; docs/sdk.md "Names") adds `conversations.title`
with `title_seq` (the conversation_seq the title is known as of: a group's title from
the session list, its CREATED notice or a title notice, the newest wins) and `profiles`
(display names of users, user_id -> name, as PULL_PROFILES answered). Migration 3 -> 4
adds the columns and the table; titles and names fill in on the next list pull.

Version 5 (a restored or copied store; docs/decisions/0081) adds `meta.machine_id`,
the machine the store was last opened on (machine_id(): $QIM_MACHINE_ID, else
/etc/machine-id). Every open draws a new store_nonce, so a file put back from an older
copy never reissues a client_message_id (pending rows and ops keep the cmids they were
stored with). A store opened on another machine than its own is a copy: asked for its
device (no device id given) it becomes a new device of this machine (a new random
device id, its cursor dropped, a REBUILD on the next connect); opened for a given
device id it is refused (StoreError). Migration 4 -> 5 adds the column; a store
without a machine adopts the one that opens it.

Replies, mentions and edits (docs/decisions/0120) live in side tables that every open
creates when missing (qim/sdk/extras.py): no version change, and a store an older SDK
opens keeps working (it ignores them).
"""

from __future__ import annotations

import os
import secrets
import sqlite3
from typing import Optional

from qim._core import ids
from qim.consts import CONVERSATION_KIND_GROUP, U63_MAX
from qim.sdk import conversations, extras
from qim.sdk.model import StoreError

SCHEMA_VERSION = 5
MACHINE_ID_ENV = "QIM_MACHINE_ID"
MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")

TABLES = """
CREATE TABLE IF NOT EXISTS meta (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  schema_version INTEGER NOT NULL,
  tenant_hex TEXT NOT NULL,
  user_id INTEGER NOT NULL,
  device_id INTEGER NOT NULL,
  next_ordinal INTEGER NOT NULL,
  store_nonce BLOB CHECK (length(store_nonce) = 16),
  rebuild_needed INTEGER NOT NULL DEFAULT 0,
  machine_id TEXT);
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
  source TEXT NOT NULL,
  state INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
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

OPS_TABLE = """
CREATE TABLE IF NOT EXISTS ops (
  kind TEXT NOT NULL,
  key BLOB NOT NULL,
  cmid BLOB NOT NULL UNIQUE CHECK (length(cmid) = 16),
  state TEXT NOT NULL,
  reply BLOB,
  created_local_ms INTEGER NOT NULL,
  PRIMARY KEY (kind, key)) WITHOUT ROWID;
"""


CONVERSATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS conversations (
  conversation_id BLOB PRIMARY KEY CHECK (length(conversation_id) = 16),
  kind INTEGER NOT NULL,
  peer_user_id INTEGER NOT NULL DEFAULT 0,
  group_id INTEGER NOT NULL DEFAULT 0,
  joined_at INTEGER NOT NULL DEFAULT 0,
  left_at INTEGER NOT NULL DEFAULT 0,
  read_seq INTEGER NOT NULL DEFAULT 0,
  read_confirmed INTEGER NOT NULL DEFAULT 0,
  head_seq INTEGER NOT NULL DEFAULT 0,
  last_activity_id BLOB,
  head BLOB,
  srv_read_seq INTEGER, srv_head_seq INTEGER, srv_unread INTEGER, srv_exact INTEGER,
  complete INTEGER NOT NULL DEFAULT 0,
  unread INTEGER NOT NULL DEFAULT 0,
  unread_exact INTEGER NOT NULL DEFAULT 1,
  oldest_reached INTEGER NOT NULL DEFAULT 0,
  updated_local_ms INTEGER NOT NULL,
  title TEXT NOT NULL DEFAULT '',
  title_seq INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS conversations_by_activity ON conversations (last_activity_id);
"""

PROFILES_TABLE = """
CREATE TABLE IF NOT EXISTS profiles (
  user_id INTEGER PRIMARY KEY,
  display_name TEXT NOT NULL,
  fetched_local_ms INTEGER NOT NULL);
"""


def _has_table(db: sqlite3.Connection, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def _migrate_1_to_2(db: sqlite3.Connection) -> None:
    db.execute("ALTER TABLE meta ADD COLUMN store_nonce BLOB CHECK (length(store_nonce) = 16)")
    db.execute("ALTER TABLE meta ADD COLUMN rebuild_needed INTEGER NOT NULL DEFAULT 0")
    db.execute("ALTER TABLE messages ADD COLUMN state INTEGER NOT NULL DEFAULT 0")
    db.execute(OPS_TABLE)
    suspect = db.execute("SELECT 1 FROM messages WHERE body = x'' LIMIT 1").fetchone() is not None
    db.execute("UPDATE meta SET schema_version = ?, store_nonce = ?, rebuild_needed = ?",
               (SCHEMA_VERSION, new_nonce(), int(suspect)))


def new_device_id() -> int:
    """A random non-zero 63-bit device id."""
    return secrets.randbits(63) or 1


def machine_id(environ=None) -> Optional[str]:
    """This machine's identity for the copy check: $QIM_MACHINE_ID (containers that
    share an image's machine-id set it), else the first of MACHINE_ID_FILES, else None
    (no check)."""
    env = os.environ if environ is None else environ
    if env.get(MACHINE_ID_ENV):
        return env[MACHINE_ID_ENV].strip()
    for name in MACHINE_ID_FILES:
        try:
            with open(name, encoding="ascii") as f:
                got = f.read().strip()
        except (OSError, UnicodeDecodeError):
            continue
        if got:
            return got
    return None


def _copied_here(db: sqlite3.Connection, device: int, device_id: Optional[int]) -> int:
    """A store made on another machine (decision 0081): two machines must never run one
    device (each would kick the other and share its mailbox cursor). Asked for its
    device, it becomes a new one here; opened for a given device, StoreError."""
    if device_id is not None:
        raise StoreError(f"this store was copied from another machine, where it is device {device}: it cannot be "
                         "that device here; open it without a device id (qim.sdk.device_identity) to make it a "
                         "new device of this machine, or use another data directory")
    new = new_device_id()
    # the new device has its own mailbox: start from 0 and REBUILD what the store holds;
    # pending rows stay (the writer deduplicates a user's cmid whichever device sends it)
    db.execute("DELETE FROM cursor")
    db.execute("UPDATE meta SET device_id = ?, rebuild_needed = 1", (new,))
    return new


def new_nonce() -> bytes:
    """16 random bytes, never all zero (ids.client_message_id refuses a zero nonce)."""
    while True:
        nonce = secrets.token_bytes(16)
        if any(nonce):
            return nonce


def open_db(db: sqlite3.Connection, tenant: int, user_id: int, device_id: Optional[int],
            machine: Optional[str] = None) -> tuple[int, bytes]:
    """Create, migrate or check the schema and the identity on `machine` (None: no
    machine check, e.g. ":memory:"); draws this open's store_nonce (module docstring).
    Returns (device_id, store_nonce). StoreError on another identity, another device,
    a copy from another machine opened for a given device id, or an unknown (newer)
    schema version."""
    db.execute("BEGIN IMMEDIATE")
    try:
        version, migrated = None, False
        if _has_table(db, "meta"):
            row = db.execute("SELECT schema_version FROM meta").fetchone()
            version = row[0] if row else None
        if version == 1:
            _migrate_1_to_2(db)
            version = 2
        if version == 2:
            migrated = True  # the conversations table (with titles) is created below
        elif version == 3:
            db.execute("ALTER TABLE conversations ADD COLUMN title TEXT NOT NULL DEFAULT ''")
            db.execute("ALTER TABLE conversations ADD COLUMN title_seq INTEGER NOT NULL DEFAULT 0")
        elif version is not None and version not in (4, SCHEMA_VERSION):
            raise StoreError(f"store schema version {version} is not supported (this SDK: {SCHEMA_VERSION})")
        if version is not None and version < SCHEMA_VERSION:
            if not any(col[1] == "machine_id" for col in db.execute("PRAGMA table_info(meta)")):
                db.execute("ALTER TABLE meta ADD COLUMN machine_id TEXT")
            db.execute("UPDATE meta SET schema_version = ?", (SCHEMA_VERSION,))
        for statement in (TABLES + OPS_TABLE + CONVERSATIONS_TABLE + PROFILES_TABLE).split(";"):
            if statement.strip():
                db.execute(statement)
        extras.create(db)  # side tables of version 5 (qim/sdk/extras.py: no version of their own)
        if migrated:  # the rows of a migrated store come from its messages
            _fill_from_messages(db, user_id)
        row = db.execute("SELECT tenant_hex, user_id, device_id, machine_id FROM meta").fetchone()
        if row is None:
            device = device_id or new_device_id()
            if not 0 < device <= U63_MAX:
                raise StoreError("device_id must be a non-zero u64 with bit 63 clear")
            db.execute("INSERT INTO meta (id, schema_version, tenant_hex, user_id, device_id, next_ordinal)"
                       " VALUES (1, ?, ?, ?, ?, 0)", (SCHEMA_VERSION, f"{tenant:032x}", user_id, device))
        else:
            tenant_hex, stored_user, device, home = row
            if tenant_hex != f"{tenant:032x}" or stored_user != user_id:
                raise StoreError("store belongs to another identity")
            if home is not None and machine is not None and home != machine:
                device = _copied_here(db, device, device_id)
            if device_id is not None and device_id != device:
                exc = StoreError("store belongs to another device")
                exc.stored_device = device
                raise exc
        nonce = new_nonce()  # every open: a restored copy never reissues a cmid (decision 0081)
        db.execute("UPDATE meta SET store_nonce = ?, machine_id = ?", (nonce, machine))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return device, bytes(nonce)


def _fill_from_messages(db: sqlite3.Connection, user_id: int) -> None:
    """Rows for the conversations of a store migrated from schema 2 (module docstring):
    head, peer and the read position of our own newest message, from the stored messages."""
    touch = conversations.Touch()
    for (conv,) in db.execute("SELECT DISTINCT conversation_id FROM messages").fetchall():
        newest = db.execute("SELECT message_id, conversation_seq, sender_id, created_at_ms, message_type,"
                            " custom_type, body, state FROM messages WHERE conversation_id = ?"
                            " ORDER BY conversation_seq DESC LIMIT 1", (conv,)).fetchone()
        peer = db.execute("SELECT sender_id FROM messages WHERE conversation_id = ? AND sender_id != ? LIMIT 1",
                          (conv, user_id)).fetchone()
        is_group = ids.conversation_kind(bytes(conv)) == CONVERSATION_KIND_GROUP
        conversations.ensure(db, conv, peer=peer[0] if peer and not is_group else 0)
        conversations.advance_head(db, conv, newest[0], newest[1], conversations.head_item(*newest))
        own = db.execute("SELECT max(conversation_seq) FROM messages WHERE conversation_id = ? AND sender_id = ?",
                         (conv, user_id)).fetchone()[0]
        if own:
            conversations.move_read(db, conv, own, True, touch)
        touch.add(conv)
    for conv in touch.convs:
        conversations.recompute(db, user_id, conv)
