"""Deterministic planning of one Outbox record (DESIGN.md §5.3, seed 001 §2.4).

Direct: the shards of the frozen recipients (peer and sender). The plan depends only
on the record, so a replayed batch produces byte-identical dispatches.
"""

from __future__ import annotations

from qim._core import ids
from qim.errors import QimError
from qim.proto.v1 import internal_pb2
from qim.services.dispatch_record import Dispatch


class PlanError(QimError):
    """The Outbox record cannot be planned (undecodable or frozen shard_count differs)."""


def plan(outbox_bytes: bytes, shard_count: int) -> list[tuple[int, Dispatch]]:
    """[(target_shard, dispatch)] in ascending shard order. PlanError on a bad record."""
    try:
        rec = internal_pb2.OutboxRecord.FromString(outbox_bytes)
    except Exception as exc:  # protobuf raises DecodeError and friends
        raise PlanError(f"undecodable outbox record: {exc.__class__.__name__}") from None
    if rec.shard_count != shard_count:
        raise PlanError(f"outbox record frozen with shard_count={rec.shard_count}, fanout runs {shard_count}")
    m = rec.record
    if len(m.message_id) != 16 or not rec.recipients:
        raise PlanError("outbox record without message_id or recipients")
    tenant = int.from_bytes(m.tenant_id, "big")
    by_shard: dict[int, list[int]] = {}
    for user in rec.recipients:
        by_shard.setdefault(ids.mailbox_shard(tenant, user, shard_count), []).append(user)
    out = []
    for shard in sorted(by_shard):
        out.append((shard, Dispatch(
            tenant=tenant, dispatch_id=ids.dispatch_id(m.message_id, shard), message_id=m.message_id,
            conversation_id=m.conversation_id, conversation_seq=m.conversation_seq, sender_id=m.sender_id,
            created_at_ms=m.created_at_ms, message_type=m.message_type, target_shard=shard,
            client_message_id=m.client_message_id, custom_type=m.custom_type,
            recipients=tuple(sorted(set(by_shard[shard]))), body=m.body if rec.inline_body else None,
        )))
    return out
