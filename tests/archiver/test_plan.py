"""What one Outbox batch writes to the archive (qim/services/archiver/plan.py):
pure logic, vectors."""

from __future__ import annotations

import pytest

from qim.consts import DAY_MS, MESSAGE_TYPE_CONTROL, U63_MAX
from qim.proto.v1 import internal_pb2, message_pb2
from qim.services.archiver.plan import ArchivePlanError, plan, records_of
from qim.stores.retention import check_class, retention_ms, ttl_seconds
from qim.wire.outbox import encode

NOW = 1_800_000_000_000
CONV = b"\x01" + bytes(range(1, 16))


def rec(seq: int, created: int = NOW - 1000, mtype: int = 1, body: bytes = b"b", mid: bytes = b"",
        tenant: int = 3) -> message_pb2.MessageRecord:
    return message_pb2.MessageRecord(tenant_id=tenant.to_bytes(16, "big"),
                                     message_id=mid or created.to_bytes(6, "big") + bytes([seq]) + bytes(9),
                                     conversation_id=CONV, conversation_seq=seq, sender_id=5, created_at_ms=created,
                                     message_type=mtype, body=body)


def recall_of(target: message_pb2.MessageRecord, seq: int, created: int = NOW - 500) -> message_pb2.MessageRecord:
    body = message_pb2.ControlEvent(state_change=message_pb2.MessageStateChange(
        message_id=target.message_id, state=message_pb2.MESSAGE_STATE_RECALLED,
        conversation_seq=target.conversation_seq)).SerializeToString()
    return rec(seq, created, MESSAGE_TYPE_CONTROL, body)


def test_records_ttls_and_the_oldest_per_conversation():
    a, b = rec(1, NOW - 5000), rec(2, NOW - 1000)
    out = plan([a, b], {}, 30, NOW)[3]
    assert [r.record for r in out.records] == [a, b]
    assert [r.ttl_s for r in out.records] == [30 * 86400 - 5, 30 * 86400 - 1]
    assert out.oldest == {CONV: NOW - 5000} and out.changes == [] and out.expired == 0


def test_a_recall_rewrites_its_target_with_the_targets_expiry_at_the_controls_time():
    target = rec(1, NOW - DAY_MS + 10_000)
    control = recall_of(target, 2, NOW - 100)
    out = plan([target, control], {(3, CONV): "ephemeral_24h"}, 30, NOW)[3]
    assert len(out.records) == 2
    (change,) = out.changes
    assert (change.message_id, change.conversation_seq, change.state) == (target.message_id, 1, 1)
    assert change.changed_at_ms == NOW - 100 and change.ttl_s == 10  # the target's 24 h, not the control's


def test_expired_messages_are_counted_not_written_and_compliance_hold_never_expires():
    old = rec(1, NOW - 31 * DAY_MS)
    assert plan([old], {}, 30, NOW)[3].expired == 1 and not plan([old], {}, 30, NOW)[3].records
    kept = plan([old], {(3, CONV): "compliance_hold"}, 30, NOW)[3]
    assert kept.records[0].ttl_s == 0 and kept.expired == 0


def test_a_message_twice_is_written_once_and_one_seq_with_two_messages_stops():
    a = rec(1)
    assert len(plan([a, a], {}, 30, NOW)[3].records) == 1
    with pytest.raises(ArchivePlanError, match="two messages"):
        plan([a, rec(1, mid=b"\x02" * 16)], {}, 30, NOW)


def test_tenants_are_planned_apart():
    out = plan([rec(1, tenant=1), rec(1, tenant=2)], {}, 30, NOW)
    assert sorted(out) == [1, 2]


def test_outbox_values_that_must_not_be_archived_stop_the_batch():
    good = encode(internal_pb2.OutboxRecord(shard_count=8).SerializeToString(), rec(1).SerializeToString())
    assert records_of([good]) == [rec(1)]
    with pytest.raises(ArchivePlanError, match="record 1 of the batch"):
        records_of([good, b"\xff\xff\xff"])
    short = rec(1)
    short.conversation_id = b"\x01" * 3
    with pytest.raises(ArchivePlanError, match="wrong length"):
        records_of([encode(b"", short.SerializeToString())])
    big = rec(1)
    big.sender_id = U63_MAX + 1
    with pytest.raises(ArchivePlanError, match="bit 63"):
        records_of([encode(b"", big.SerializeToString())])


def test_retention_classes():
    assert retention_ms("default", 30) == 30 * DAY_MS and retention_ms("ephemeral_24h", 30) == DAY_MS
    assert retention_ms("compliance_hold", 30) is None
    assert ttl_seconds(NOW - 1, "default", 1, NOW) == 86400  # rounded up, never 0 while alive
    assert ttl_seconds(NOW - DAY_MS, "default", 1, NOW) is None
    assert ttl_seconds(0, "compliance_hold", 1, NOW) == 0
    with pytest.raises(ValueError, match="unknown retention class"):
        check_class("forever")
