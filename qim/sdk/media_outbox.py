"""Pending media sends in the LocalStore: an upload survives an app restart like a pending
text (issue 40; docs/sdk.md "Media"; docs/decisions/0147).

`send_media` records the send before its upload starts, in a side table created when
first used (CREATE ... IF NOT EXISTS: no schema version; an older SDK ignores it, as
with qim/sdk/extras.py): the client_message_id reserved for the MEDIA message, the
conversation and recipient, the file (its path; bytes given by the app are first
copied to a spool file beside the store), its size, SHA-256, type and name, and as the
upload goes the upload id and the parts the store holds. When the upload is complete
the signed reference is recorded too, then the MEDIA message becomes an ordinary
pending send with the reserved client_message_id (LocalStore.add_pending(cmid=)) and
the row goes. A Client opened later on the same store finishes each row
(`client.resume_media()`): the upload resumes with the parts the store lacks (a new
upload when the service forgot it), a row that already has its reference is only
sent, and a row whose send is already pending is only dropped. The send uses the same
client_message_id and, once a reference exists, the same body, so the writer records
the message once whatever step a crash cut.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

DDL = (
    "CREATE TABLE IF NOT EXISTS media_pending (client_message_id BLOB PRIMARY KEY"
    " CHECK (length(client_message_id) = 16), conversation_id BLOB NOT NULL, recipient_user_id INTEGER NOT NULL,"
    " path TEXT NOT NULL, spooled INTEGER NOT NULL, size INTEGER NOT NULL, sha256 TEXT NOT NULL,"
    " mime TEXT NOT NULL, name TEXT NOT NULL, keep_metadata INTEGER NOT NULL, upload TEXT NOT NULL DEFAULT '',"
    " parts_done INTEGER NOT NULL DEFAULT 0, ref BLOB, created_local_ms INTEGER NOT NULL) WITHOUT ROWID"
)
COLUMNS = (
    "client_message_id, conversation_id, recipient_user_id, path, spooled, size, sha256, mime, name,"
    " keep_metadata, upload, parts_done, ref, created_local_ms"
)


@dataclass(frozen=True)
class PendingMedia:
    """One media send not yet handed to the sender (module doc): `upload` is "" before
    the upload has an id (or for a file that goes through the service), `ref` b"" before
    the upload completed; `spooled`: `path` is the SDK's copy, deleted with the row."""

    client_message_id: bytes
    conversation_id: bytes
    recipient_user_id: int
    path: str
    spooled: bool
    size: int
    sha256: str
    mime: str
    name: str
    keep_metadata: bool
    upload: str = ""
    parts_done: int = 0
    ref: bytes = b""
    created_local_ms: int = 0


class MediaOutbox:
    """The `media_pending` rows of one LocalStore. Its methods run on the store's thread
    (`await outbox.run(outbox.add, row)`), on the store's own connection (autocommit:
    each call is one durable statement, `PRAGMA synchronous=FULL`)."""

    def __init__(self, store: Any, store_path: str) -> None:
        self.store, self.store_path = store, store_path
        self._made = False

    def spool_dir(self) -> Optional[Path]:
        """Where copies of bytes given to send_media are kept (beside the store file);
        None for an in-memory store (nothing survives it anyway)."""
        return None if not self.store_path or self.store_path == ":memory:" else Path(self.store_path + ".media")

    async def run(self, fn: Any, *args: Any) -> Any:
        """Run `fn(*args)` (a method of this outbox) on the store's thread."""
        return await self.store.run(fn, *args)

    def _db(self) -> Any:
        db = self.store._db  # the LocalStore's connection: one writer, on the store's thread
        if not self._made:
            db.execute(DDL)
            self._made = True
        return db

    def reserve(self) -> bytes:
        """A new client_message_id of this store (never reused: its ordinal block is durable)."""
        return bytes(self.store.cmid_for(self.store.reserve_ordinal()))

    def add(self, row: PendingMedia) -> None:
        """Record a media send before its upload starts."""
        marks = ",".join("?" * 14)
        self._db().execute(
            f"INSERT INTO media_pending ({COLUMNS}) VALUES ({marks})",
            (
                row.client_message_id,
                row.conversation_id,
                row.recipient_user_id,
                row.path,
                int(row.spooled),
                row.size,
                row.sha256,
                row.mime,
                row.name,
                int(row.keep_metadata),
                row.upload,
                row.parts_done,
                row.ref or None,
                row.created_local_ms or int(time.time() * 1000),
            ),
        )

    def started(self, cmid: bytes, upload: str) -> None:
        """The upload of `cmid` has the id `upload` (no parts yet)."""
        self._db().execute(
            "UPDATE media_pending SET upload = ?, parts_done = 0 WHERE client_message_id = ?", (upload, cmid)
        )

    def part_done(self, cmid: bytes) -> None:
        """One more part of `cmid`'s upload is in the store (a count, for the app's display)."""
        self._db().execute("UPDATE media_pending SET parts_done = parts_done + 1 WHERE client_message_id = ?", (cmid,))

    def uploaded(self, cmid: bytes, ref: bytes) -> None:
        """The upload of `cmid` completed with the signed reference `ref` (the MEDIA body)."""
        self._db().execute("UPDATE media_pending SET ref = ? WHERE client_message_id = ?", (ref, cmid))

    def remove(self, cmid: bytes) -> None:
        """Drop the row of `cmid` and its spool copy (sent, or refused for good)."""
        db = self._db()
        got = db.execute("SELECT path, spooled FROM media_pending WHERE client_message_id = ?", (cmid,)).fetchone()
        db.execute("DELETE FROM media_pending WHERE client_message_id = ?", (cmid,))
        if got is not None and got[1]:
            try:
                os.unlink(got[0])
            except FileNotFoundError:
                pass

    def rows(self) -> list[PendingMedia]:
        """Every pending media send, oldest first."""
        rows = self._db().execute(f"SELECT {COLUMNS} FROM media_pending ORDER BY created_local_ms, client_message_id")
        return [
            PendingMedia(
                bytes(r[0]),
                bytes(r[1]),
                r[2],
                r[3],
                bool(r[4]),
                r[5],
                r[6],
                r[7],
                r[8],
                bool(r[9]),
                r[10],
                r[11],
                bytes(r[12] or b""),
                r[13],
            )
            for r in rows
        ]

    def pending_state(self, cmid: bytes) -> Optional[str]:
        """The state of `cmid`'s ordinary pending row (None: none yet, or resolved and gone)."""
        return self.store.pending_state(cmid)
