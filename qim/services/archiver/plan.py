"""What one Outbox batch writes to the archive (docs/decisions/0023; pure logic, no I/O).

Per Outbox record: the canonical MessageRecord is archived as it is, with the TTL left
of its conversation's retention class (qim/stores/retention.py); a message already past
its retention is not written (its row would expire at once) and is counted. A CONTROL
message announcing a recall/delete (ControlEvent.state_change) is archived too, and
also rewrites its target's row: state, no body, at the CONTROL's created_at, with the
target's own expiry (the target's created_at is the top 48 bits of its message_id).

A record the archive must not take stops the archiver (never skipped): an undecodable
Outbox record, a tenant that is not 16 bytes, a u64 with bit 63 set, or two messages
with one (conversation, conversation_seq) in a batch (a sequence reused: the seed's
"same seq, other content is refused").
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Sequence

from qim.consts import U63_MAX
from qim.proto.v1 import message_pb2
from qim.stores.archive import ArchiveRecord, ArchiveStateChange
from qim.stores.retention import ttl_seconds
from qim.wire import outbox as outbox_codec
from qim.wire.control import created_at_of, edit_of, state_change_of


class ArchivePlanError(Exception):
    """An Outbox record the archiver must not skip and cannot archive."""


@dataclass
class TenantBatch:
    """What a batch writes for one tenant; `oldest`: conversation -> created_at_ms of its
    oldest archived message (the trim queue's time)."""

    records: list[ArchiveRecord] = field(default_factory=list)
    changes: list[ArchiveStateChange] = field(default_factory=list)
    oldest: dict[bytes, int] = field(default_factory=dict)
    expired: int = 0


def records_of(values: Sequence[bytes]) -> list[message_pb2.MessageRecord]:
    """The MessageRecords of raw Outbox values; ArchivePlanError naming the index of a bad one."""
    out = []
    for i, value in enumerate(values):
        try:
            rec = outbox_codec.decode(value).record
        except outbox_codec.OutboxDecodeError as exc:
            raise ArchivePlanError(f"record {i} of the batch: {exc}") from None
        if len(rec.tenant_id) != 16 or len(rec.message_id) != 16 or len(rec.conversation_id) != 16:
            raise ArchivePlanError(f"record {i} of the batch: ids of the wrong length")
        if max(rec.conversation_seq, rec.sender_id, rec.sender_device_id, rec.created_at_ms) > U63_MAX:
            raise ArchivePlanError(f"record {i} of the batch: a u64 with bit 63 set")
        out.append(rec)
    return out


def plan(records: Sequence[message_pb2.MessageRecord], classes: dict[tuple[int, bytes], str], default_days: int,
         now_ms: int) -> dict[int, TenantBatch]:
    """tenant -> TenantBatch for `records` (Outbox order; a message seen twice is written
    once). `classes`: (tenant, conversation) -> retention class (default when absent)."""
    out: dict[int, TenantBatch] = defaultdict(TenantBatch)
    seen: dict[tuple[int, bytes, int], bytes] = {}
    for rec in records:
        tenant = int.from_bytes(rec.tenant_id, "big")
        key = (tenant, rec.conversation_id, rec.conversation_seq)
        prior = seen.get(key)
        if prior is not None:
            if prior != rec.message_id:
                raise ArchivePlanError(f"conversation_seq {rec.conversation_seq} of {rec.conversation_id.hex()} "
                                       "carries two messages in one batch")
            continue
        seen[key] = rec.message_id
        cls = classes.get((tenant, rec.conversation_id), "default")
        batch = out[tenant]
        ttl = ttl_seconds(rec.created_at_ms, cls, default_days, now_ms)
        if ttl is None:
            batch.expired += 1
        else:
            batch.records.append(ArchiveRecord(rec, ttl))
            batch.oldest[rec.conversation_id] = min(batch.oldest.get(rec.conversation_id, rec.created_at_ms),
                                                    rec.created_at_ms)
        edit = edit_of(rec)
        if edit is not None:  # the edited target's row takes the new version (decision 0120)
            target_ttl = ttl_seconds(created_at_of(edit.message_id), cls, default_days, now_ms)
            if target_ttl is not None:
                batch.changes.append(ArchiveStateChange(
                    tenant, rec.conversation_id, edit.message_id, edit.conversation_seq, 0, rec.created_at_ms,
                    target_ttl, edit.body, edit.version, edit.edited_at_ms, rec.message_id))
        change = state_change_of(rec)
        if change is not None:
            # the target, and the CONTROL messages that announced its edits (they hold its
            # earlier bodies; docs/decisions/0120): the recall's record lists them
            targets = [(change.message_id, change.conversation_seq),
                       *zip(rec.edits.control_message_ids, rec.edits.control_seqs)]
            for mid, seq in targets:
                target_ttl = ttl_seconds(created_at_of(mid), cls, default_days, now_ms)
                if target_ttl is not None:
                    batch.changes.append(ArchiveStateChange(tenant, rec.conversation_id, mid, seq, change.state,
                                                            rec.created_at_ms, target_ttl))
    return dict(out)
