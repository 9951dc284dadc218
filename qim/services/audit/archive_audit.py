"""Independent archive audit: the Outbox (commit facts) against the archived rows (issue
14: "`qimctl audit archive` (Outbox vs archived rows) prints zeros"). Pure logic: no
I/O; qim/cli/qimctl_archive.py feeds it the Outbox and the rows it asks for.

Expectation per message of the Outbox (its first occurrence; a repeated record must be
identical): its canonical record, with the state of the last recall/delete a later
CONTROL message of the Outbox announced for it (then no body), unless the message is past
its retention class (its rows may be gone: counted as expired, not checked). The
archive's message_record row and its history index row must both equal that record
field by field (what a read serves).

Counters:
- missing: no message_record row; index_missing: no history index row;
- mismatched: a row (either table) that differs from the expectation, or two Outbox
  records of one message_id with different content;
- seq_conflicts: two message_ids at one (conversation, conversation_seq) in the Outbox.
Undecodable Outbox records are listed in `errors` with their offset (the CLI exits 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from qim.proto.v1 import message_pb2
from qim.stores.retention import expired
from qim.wire.control import edit_of, state_change_of
from qim.wire.outbox import OutboxDecodeError
from qim.wire.outbox import decode as decode_outbox

MAX_DETAILS = 20


@dataclass
class ArchiveAuditResult:
    """Counters, error lines (undecodable records) and up to MAX_DETAILS detail lines."""

    outbox_messages: int = 0
    archived: int = 0
    expired: int = 0
    missing: int = 0
    index_missing: int = 0
    mismatched: int = 0
    seq_conflicts: int = 0
    errors: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """All four orphan counters are zero and nothing was undecodable."""
        return not (self.missing or self.index_missing or self.mismatched or self.seq_conflicts or self.errors)

    def line(self) -> str:
        """The one summary line the CLI prints last."""
        return (f"audit archive: outbox_messages={self.outbox_messages} archived={self.archived} "
                f"expired={self.expired} missing={self.missing} index_missing={self.index_missing} "
                f"mismatched={self.mismatched} seq_conflicts={self.seq_conflicts}")

    def detail(self, text: str) -> None:
        """Keep a detail line (bounded)."""
        if len(self.details) < MAX_DETAILS:
            self.details.append(text)


class ArchiveAudit:
    """`add_outbox(offset, value)` for every Outbox record in order, then `expected()` to
    learn what to read, then `check(...)` with the rows read, then `result`."""

    def __init__(self, default_days: int, now_ms: int) -> None:
        self._days = default_days
        self._now = now_ms
        self._records: dict[bytes, message_pb2.MessageRecord] = {}
        self._at: dict[tuple[int, bytes, int], bytes] = {}
        self._states: dict[bytes, int] = {}
        self._edits: dict[bytes, message_pb2.MessageEdit] = {}  # message_id -> its latest edit
        self._edit_ids: dict[bytes, list[bytes]] = {}  # message_id -> its edit notices, in order
        self.result = ArchiveAuditResult()

    def add_outbox(self, offset: int, value: bytes) -> None:
        """One Outbox record (in offset order)."""
        try:
            rec = decode_outbox(value).record
        except OutboxDecodeError as exc:
            self.result.errors.append(f"outbox offset {offset}: {exc}")
            return
        prior = self._records.get(rec.message_id)
        if prior is not None:
            if prior.SerializeToString(deterministic=True) != rec.SerializeToString(deterministic=True):
                self.result.mismatched += 1
                self.result.detail(f"outbox offset {offset}: message {rec.message_id.hex()} repeated with other content")
            return
        self._records[rec.message_id] = rec
        tenant = int.from_bytes(rec.tenant_id, "big")
        key = (tenant, rec.conversation_id, rec.conversation_seq)
        other = self._at.setdefault(key, rec.message_id)
        if other != rec.message_id:
            self.result.seq_conflicts += 1
            self.result.detail(f"conversation {rec.conversation_id.hex()} seq {rec.conversation_seq}: two messages")
        change = state_change_of(rec)
        if change is not None:
            self._states[change.message_id] = change.state
            for mid in rec.edits.control_message_ids:  # an edited target's edit notices (decision 0120)
                self._states[mid] = change.state
        edit = edit_of(rec)
        if edit is not None:
            known = self._edits.get(edit.message_id)
            if known is None or edit.version > known.version:
                self._edits[edit.message_id] = edit
            self._edit_ids.setdefault(edit.message_id, []).append(rec.message_id)

    def expected(self, classes: dict[tuple[int, bytes], str]) -> list[message_pb2.MessageRecord]:
        """The records the archive must hold now (final states applied; expired ones
        counted and left out). `classes`: (tenant, conversation) -> retention class."""
        out = []
        for mid, rec in self._records.items():
            tenant = int.from_bytes(rec.tenant_id, "big")
            cls = classes.get((tenant, rec.conversation_id), "default")
            if expired(rec.created_at_ms, cls, self._days, self._now):
                self.result.expired += 1
                continue
            want = message_pb2.MessageRecord()
            want.CopyFrom(rec)
            edit = self._edits.get(mid)
            if edit is not None:  # the latest edit, as the archiver applies it (decision 0120)
                want.body, want.version = edit.body, edit.version
                want.edits.edited_at_ms = edit.edited_at_ms
                want.edits.control_message_ids[:] = sorted(set(self._edit_ids[mid]))
            state = self._states.get(mid, 0)
            if state:
                want.state, want.body = state, b""  # type: ignore[assignment]
            out.append(want)
        self.result.outbox_messages = len(self._records)
        return out

    def conversations(self) -> set[tuple[int, bytes]]:
        """Every (tenant, conversation) of the Outbox (to read their retention classes)."""
        return {(t, c) for t, c, _ in self._at}

    def check(self, want: message_pb2.MessageRecord, record_row: Optional[message_pb2.MessageRecord],
              index_row: Optional[message_pb2.MessageRecord]) -> None:
        """Compare one expected record with its two archived rows."""
        name = f"message {want.message_id.hex()} (seq {want.conversation_seq})"
        wanted = want.SerializeToString(deterministic=True)
        ok = True
        if record_row is None:
            self.result.missing += 1
            self.result.detail(f"{name}: no message_record row")
            ok = False
        elif record_row.SerializeToString(deterministic=True) != wanted:
            self.result.mismatched += 1
            self.result.detail(f"{name}: message_record row differs")
            ok = False
        if index_row is None:
            self.result.index_missing += 1
            self.result.detail(f"{name}: no history index row")
            ok = False
        elif index_row.SerializeToString(deterministic=True) != wanted:
            self.result.mismatched += 1
            self.result.detail(f"{name}: history index row differs")
            ok = False
        if ok:
            self.result.archived += 1
