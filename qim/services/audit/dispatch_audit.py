"""Independent orphan audit: Outbox (commit facts) against the dispatch log.

docs/design.md §12 ("an independent audit of Outbox against the dispatch log finds zero
orphans"), §5.2–5.3, seed 000 (qimctl audit dispatch: 有提交无 dispatch、有 dispatch 无提交、
坐标/发送者不一致、分区错位均须为 0). Pure logic: no I/O; qim/cli/qimctl.py feeds it.

Independent of the fanout planner: the expectation is recomputed from each OutboxRecord
with `ids.mailbox_shard` / `ids.dispatch_id` and compared through a field digest of our
own; only the canonical dispatch decoder (the format's definition) is shared.

Feeding order: every Outbox record first (`add_outbox(offset, value)`), then every
dispatch record (`add_dispatch(partition, offset, value)`), then `finish()` ->
AuditResult. Memory per committed message: a 16-byte id, a 32-byte record digest and,
per expected shard, a 16-byte dispatch_id plus a 32-byte coordinate digest (no bodies).

Counters (each counts records, a record may raise several):
- committed_without_dispatch: an expected (message_id, shard) with no dispatch that has
  dispatch_id = ids.dispatch_id(mid, shard), sits in partition = shard and carries the
  same coordinates; plus every undecodable or unplannable Outbox record.
- dispatch_without_commit: a dispatch whose message_id is in no Outbox record; plus
  every undecodable dispatch record.
- coordinate_mismatch: a dispatch whose coordinates, sender, client_message_id,
  custom_type, inline body, recipients or dispatch_id differ from what its committed
  message implies (or targets a shard its audience does not map to); a duplicate Outbox
  record of one message_id with different content.
- wrong_partition: a dispatch read from a partition other than its target_shard, or
  whose recipients do not all map to that partition.
Undecodable/unplannable records are also listed in `AuditResult.errors` with their
offset (the CLI exits 2 for them): never skipped silently.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

import blake3

from qim._core import ids
from qim._core.types import MessageCoord
from qim.errors import IdError
from qim.wire.dispatch import DispatchDecodeError, decode
from qim.wire.outbox import OutboxDecodeError
from qim.wire.outbox import decode as decode_outbox

_DOMAIN = b"qim.audit.dispatch-coords.v1\0"
_FIXED = struct.Struct(">16s16sQQQqI")  # tenant mid cseq sender created mtype shard
MAX_DETAILS = 20


def _var(b: bytes) -> bytes:
    return struct.pack(">I", len(b)) + b


def coords_digest(tenant: int, coord: MessageCoord, client_message_id: bytes, shard: int,
                  recipients: Iterable[int], body: Optional[bytes]) -> bytes:
    """32-byte digest of everything one shard's dispatch must carry (body: inline bytes or None).

    Variable-length fields are length-prefixed so no two field tuples collide by layout.
    ValueError/OverflowError/struct.error on out-of-range integers (callers report them).
    """
    rcpt = sorted(set(recipients))
    h = blake3.blake3(_DOMAIN)
    h.update(_FIXED.pack(tenant.to_bytes(16, "big"), coord.message_id, coord.conversation_seq, coord.sender_id,
                         coord.created_at_ms, coord.message_type, shard))
    h.update(_var(coord.conversation_id) + _var(client_message_id) + _var(coord.custom_type))
    h.update(struct.pack(f">I{len(rcpt)}Q", len(rcpt), *rcpt))
    h.update(b"\0" if body is None else b"\1" + blake3.blake3(body).digest())
    return h.digest()


@dataclass
class AuditResult:
    """Counts read, the four orphan counters, error lines (with offsets) and sample details."""

    outbox_records: int = 0
    committed_messages: int = 0
    expected_dispatches: int = 0
    dispatch_records: int = 0
    committed_without_dispatch: int = 0
    dispatch_without_commit: int = 0
    coordinate_mismatch: int = 0
    wrong_partition: int = 0
    errors: list[str] = field(default_factory=list)   # undecodable/unplannable: every one
    details: list[str] = field(default_factory=list)  # first MAX_DETAILS orphans

    @property
    def clean(self) -> bool:
        """True when all four counters are 0."""
        return not (self.committed_without_dispatch or self.dispatch_without_commit
                    or self.coordinate_mismatch or self.wrong_partition)

    def counts_line(self) -> str:
        """The `read: ...` line: how much of each log the audit read."""
        return (f"read: outbox_records={self.outbox_records} committed_messages={self.committed_messages} "
                f"expected_dispatches={self.expected_dispatches} dispatch_records={self.dispatch_records}")

    def counters_line(self) -> str:
        """The `audit: ...` line: the four orphan counters (all zero when clean)."""
        return (f"audit: committed_without_dispatch={self.committed_without_dispatch} "
                f"dispatch_without_commit={self.dispatch_without_commit} "
                f"coordinate_mismatch={self.coordinate_mismatch} wrong_partition={self.wrong_partition}")


class DispatchAudit:
    """Streaming comparison for one dispatch topic of `shard_count` partitions.

    ValueError when shard_count is not a power of two; RuntimeError on feeding out of order.
    """

    def __init__(self, shard_count: int,
                 snapshot: Optional[Callable[[int, bytes, int], Optional[list[int]]]] = None) -> None:
        """`snapshot(tenant, group conversation, version)` -> member ids, or None when the
        snapshot is gone; needed for group audiences (a group record without it is
        reported as unplannable, never skipped)."""
        self._snapshot = snapshot
        if shard_count < 1 or shard_count & (shard_count - 1) or shard_count > 65536:
            raise ValueError(f"shard_count={shard_count} is not a power of two in 1..65536")
        self.shard_count = shard_count
        self.result = AuditResult()
        self._committed: dict[bytes, Optional[bytes]] = {}  # mid -> record digest (None: unplannable)
        self._expected: dict[bytes, tuple[bytes, int, bytes]] = {}  # dispatch_id -> (mid, shard, coords)
        self._covered: set[bytes] = set()
        self._dispatch_phase = False
        self._finished = False

    def _detail(self, text: str) -> None:
        if len(self.result.details) < MAX_DETAILS:
            self.result.details.append(text)

    # --- Outbox ----------------------------------------------------------------
    def add_outbox(self, offset: int, value: Optional[bytes]) -> None:
        """One Outbox record (value None = tombstone). Duplicates of a message_id are expected."""
        if self._dispatch_phase:
            raise RuntimeError("every Outbox record must be added before the first dispatch")
        r = self.result
        r.outbox_records += 1
        try:
            rec = decode_outbox(value if value is not None else b"")
        except OutboxDecodeError as exc:
            self._bad_outbox(offset, f"undecodable ({exc})")
            return
        m = rec.record
        mid = m.message_id
        problem = self._outbox_problem(rec)
        if problem:
            self._bad_outbox(offset, problem, mid if len(mid) == 16 else None)
            return
        tenant = int.from_bytes(m.tenant_id, "big")
        body = m.body if rec.inline_body else None
        audience = list(rec.recipients)
        if not audience:
            members = self._snapshot(tenant, rec.group_conversation_id, rec.membership_version) if self._snapshot else None
            if not members:
                self._bad_outbox(offset, f"unplannable (member snapshot v{rec.membership_version} unavailable)", mid)
                return
            audience = members
        by_shard: dict[int, list[int]] = {}
        try:
            for user in audience:
                by_shard.setdefault(ids.mailbox_shard(tenant, user, self.shard_count), []).append(user)
            coord = MessageCoord(mid, m.conversation_id, m.conversation_seq, m.sender_id, m.created_at_ms,
                                 m.message_type, m.custom_type)
            shards = {s: coords_digest(tenant, coord, m.client_message_id, s, users, body)
                      for s, users in by_shard.items()}
        except (IdError, ValueError, OverflowError, struct.error) as exc:
            self._bad_outbox(offset, f"unplannable ({exc})", mid)
            return
        h = blake3.blake3(b"".join(shards[s] for s in sorted(shards)))
        h.update(struct.pack(">QI", m.sender_device_id, rec.shard_count) + blake3.blake3(m.body).digest())
        digest = h.digest()
        if mid in self._committed:
            if self._committed[mid] is not None and self._committed[mid] != digest:
                r.coordinate_mismatch += 1
                self._detail(f"coordinate_mismatch: outbox@{offset} duplicates message {mid.hex()} with other content")
            return
        self._committed[mid] = digest
        r.committed_messages += 1
        for shard, coords in shards.items():
            self._expected[ids.dispatch_id(mid, shard)] = (mid, shard, coords)
        r.expected_dispatches += len(shards)

    def _outbox_problem(self, rec) -> str:
        m = rec.record
        if len(m.message_id) != 16 or len(m.conversation_id) != 16 or len(m.tenant_id) > 16:
            return "unplannable (bad message_id, conversation_id or tenant_id length)"
        if not rec.recipients and len(rec.group_conversation_id) != 16:
            return "unplannable (no recipients and no group audience)"
        if rec.shard_count != self.shard_count:
            return f"unplannable (frozen shard_count={rec.shard_count}, audit runs {self.shard_count})"
        return ""

    def _bad_outbox(self, offset: int, why: str, mid: Optional[bytes] = None) -> None:
        self.result.committed_without_dispatch += 1
        self.result.errors.append(f"outbox@{offset}: {why}")
        if mid is not None and mid not in self._committed:
            self._committed[mid] = None  # its dispatches are not "without commit"; not comparable

    # --- dispatch log -------------------------------------------------------------
    def add_dispatch(self, partition: int, offset: int, value: Optional[bytes]) -> None:
        """One dispatch record read from `partition` at `offset`."""
        if self._finished:
            raise RuntimeError("audit already finished")
        self._dispatch_phase = True
        r = self.result
        r.dispatch_records += 1
        where = f"dispatch[{partition}]@{offset}"
        try:
            d = decode(value if value is not None else b"")
        except DispatchDecodeError as exc:
            r.dispatch_without_commit += 1
            r.errors.append(f"{where}: undecodable ({exc})")
            return
        misplaced = partition != d.target_shard
        try:
            misplaced = misplaced or any(ids.mailbox_shard(d.tenant, u, self.shard_count) != partition
                                         for u in d.recipients)
        except IdError as exc:
            misplaced = True
            r.errors.append(f"{where}: recipient cannot be placed ({exc})")
        if misplaced:
            r.wrong_partition += 1
            self._detail(f"wrong_partition: {where} message {d.coord.message_id.hex()} target_shard={d.target_shard}")
        if d.coord.message_id not in self._committed:
            r.dispatch_without_commit += 1
            self._detail(f"dispatch_without_commit: {where} message {d.coord.message_id.hex()}")
            return
        if self._committed[d.coord.message_id] is None:
            return  # its Outbox record was already reported as unplannable
        key = ids.dispatch_id(d.coord.message_id, d.target_shard)
        exp = self._expected.get(key)
        try:
            coords = coords_digest(d.tenant, d.coord, d.client_message_id, d.target_shard, d.recipients, d.body)
        except (ValueError, OverflowError, struct.error):
            coords = b""
        if exp is None or d.dispatch_id != key or exp[2] != coords:
            r.coordinate_mismatch += 1
            self._detail(f"coordinate_mismatch: {where} message {d.coord.message_id.hex()} target_shard={d.target_shard}")
            return
        if not misplaced:
            self._covered.add(key)

    def finish(self) -> AuditResult:
        """Count expected shards never covered; idempotent."""
        if not self._finished:
            self._finished = True
            for key, (mid, shard, _) in self._expected.items():
                if key not in self._covered:
                    self.result.committed_without_dispatch += 1
                    self._detail(f"committed_without_dispatch: message {mid.hex()} shard {shard}")
        return self.result


def audit(outbox: Iterable[tuple[int, Optional[bytes]]],
          dispatches: Iterable[tuple[int, int, Optional[bytes]]], shard_count: int) -> AuditResult:
    """Convenience over lists: outbox = [(offset, value)], dispatches = [(partition, offset, value)]."""
    a = DispatchAudit(shard_count)
    for offset, value in outbox:
        a.add_outbox(offset, value)
    for partition, offset, value in dispatches:
        a.add_dispatch(partition, offset, value)
    return a.finish()
