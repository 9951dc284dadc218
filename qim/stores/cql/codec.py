"""Rows of the archive tables <-> MessageRecords (docs/decisions/0023; docs/design.md §3, §8).

u128 values (tenant, message_id, conversation_id, client_message_id) are 16-byte blobs;
u64 values are CQL bigint and must have bit 63 clear (checked here, before anything is
written: a value that does not fit is a bug upstream, never a silent wrap). The tenant
is stored as its 16 bytes big-endian. A record read back is built field by field, so its
serialization is the canonical one (the Redis copy is the same fields in another order).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from qim.consts import ARCHIVE_BUCKET_BITS, U63_MAX
from qim.proto.v1 import message_pb2
from qim.stores.errors import StoreCorrupt

# the column order of every record read (history rows and record rows alike)
RECORD_COLUMNS = ("conversation_seq, message_id, conversation_id, sender_id, sender_device_id, client_message_id, "
                  "message_type, custom_type, body, created_at_ms, state, ext, version, edited_at_ms, "
                  "edit_controls")


def bucket_of(seq: int) -> int:
    """The history partition bucket of conversation_seq `seq`."""
    return seq >> ARCHIVE_BUCKET_BITS


def buckets_between(lo: int, hi: int) -> range:
    """Buckets holding seqs in (lo, hi], ascending (empty when hi <= lo)."""
    return range(bucket_of(lo + 1), bucket_of(hi) + 1) if hi > lo else range(0)


def tenant_blob(tenant: int) -> bytes:
    """A u128 tenant as its 16 big-endian bytes."""
    return tenant.to_bytes(16, "big")


def u63(value: int, what: str) -> int:
    """`value` when it fits a CQL bigint with bit 63 clear; ValueError naming `what` otherwise."""
    if not 0 <= value <= U63_MAX:
        raise ValueError(f"{what} {value} does not fit a CQL bigint with bit 63 clear")
    return value


def record_values(rec: message_pb2.MessageRecord) -> tuple:
    """The RECORD_COLUMNS values of `rec` (ValueError when a u64 has bit 63 set or an id
    has the wrong length)."""
    if len(rec.message_id) != 16 or len(rec.conversation_id) != 16:
        raise ValueError("message_id and conversation_id must be 16 bytes")
    return (u63(rec.conversation_seq, "conversation_seq"), rec.message_id, rec.conversation_id,
            u63(rec.sender_id, "sender_id"), u63(rec.sender_device_id, "sender_device_id"), rec.client_message_id,
            int(rec.message_type), rec.custom_type, rec.body, u63(rec.created_at_ms, "created_at_ms"), int(rec.state),
            *_or_unset(ext_of(rec), rec.version, u63(rec.edits.edited_at_ms, "edited_at_ms"),
                       set(rec.edits.control_message_ids) if rec.version else None))


def _or_unset(*values: Any) -> tuple:
    """Columns of version 2 left unset when empty: a bound null would write a tombstone per
    archived row (most rows have no reply, mention or edit)."""
    from cassandra.query import UNSET_VALUE  # the driver is imported lazily (qim/stores/cql/session.py)

    return tuple(v if v else UNSET_VALUE for v in values)


def ext_of(rec: message_pb2.MessageRecord) -> Optional[bytes]:
    """The `ext` column of `rec` as the Outbox carried it (docs/decisions/0120): reply,
    mentions and the edit trail a recall's CONTROL record lists; None when none. An edit
    later sets body, version and edited_at_ms, never ext."""
    ext = message_pb2.MessageRecord(mention_user_ids=rec.mention_user_ids, mention_all=rec.mention_all)
    if rec.HasField("reply"):
        ext.reply.CopyFrom(rec.reply)
    if rec.edits.control_seqs:  # a recall's CONTROL record (an edited target's are edit_controls)
        ext.edits.control_message_ids[:] = rec.edits.control_message_ids
        ext.edits.control_seqs[:] = rec.edits.control_seqs
    return ext.SerializeToString() or None


def complete(row: Sequence[Any]) -> bool:
    """Whether a RECORD_COLUMNS row holds a whole record (a state change that reached CQL
    before its message leaves a partial row: key, state and body only)."""
    return row[1] is not None and row[2] is not None and row[9] is not None and row[3] is not None


def record_of(row: Sequence[Any], tenant: bytes, where: str) -> message_pb2.MessageRecord:
    """The MessageRecord of a RECORD_COLUMNS row; StoreCorrupt naming `where` when partial."""
    if not complete(row):
        raise StoreCorrupt(f"partial archived record {where}")
    seq, mid, conv, sender, device, cmid, mtype, ctype, body, created, state, ext, version, edited_at, controls = row
    rec = message_pb2.MessageRecord(
        tenant_id=tenant, message_id=mid, conversation_id=conv, conversation_seq=seq, sender_id=sender,
        sender_device_id=device or 0, client_message_id=cmid or b"", message_type=mtype or 0,
        custom_type=ctype or b"", body=body or b"", created_at_ms=created, state=state or 0, version=version or 0)
    if ext:
        rec.MergeFromString(ext)
    if edited_at:
        rec.edits.edited_at_ms = edited_at
    if controls:  # HLC ids: byte order is time order (docs/design.md §3)
        rec.edits.control_message_ids[:] = sorted(controls)
    return rec


def state_of(row: Optional[Sequence[Any]]) -> int:
    """The state column of a RECORD_COLUMNS row (NORMAL when null)."""
    return (row[10] or 0) if row is not None else 0
