"""Deterministic planning of Outbox records (qim/services/fanout/plan.py; docs/design.md §5.3):
a replayed record yields byte-identical dispatches, one per target MailboxShard in
ascending order; a group audience comes only from its frozen member snapshot, read once
per version through a bounded cache. Pure logic; the group store is a stand-in."""

from __future__ import annotations

import os

import pytest

from qim._core import ids
from qim.proto.v1 import internal_pb2, message_pb2
from qim.services.fanout.plan import MemberSnapshotCache, PlanError, by_shard, parse_outbox, plan, snapshot_key

SHARDS = 8
TENANT = 0


def record(**kw) -> message_pb2.MessageRecord:
    fields = dict(tenant_id=bytes(16), message_id=os.urandom(16), conversation_id=ids.conversation_id_direct(0, 1, 2),
                  conversation_seq=7, sender_id=1, created_at_ms=1_700_000_000_000, client_message_id=os.urandom(16),
                  message_type=1, body=b"hi")
    fields.update(kw)
    return message_pb2.MessageRecord(**fields)


def outbox(**kw) -> bytes:
    fields = dict(record=record(), recipients=[2, 1], shard_count=SHARDS, inline_body=True)
    fields.update(kw)
    return internal_pb2.OutboxRecord(**fields).SerializeToString()


def test_a_direct_record_plans_one_dispatch_per_shard_in_order_and_replays_byte_identical():
    users = list(range(1, 40))
    raw = outbox(recipients=users)
    first = plan(parse_outbox(raw, SHARDS), SHARDS)
    again = plan(parse_outbox(raw, SHARDS), SHARDS)
    assert [s for s, _ in first] == sorted({ids.mailbox_shard(TENANT, u, SHARDS) for u in users})
    assert [d.encode() for _, d in first] == [d.encode() for _, d in again]
    rec = parse_outbox(raw, SHARDS).record
    for shard, dispatch in first:
        assert dispatch.dispatch_id == ids.dispatch_id(rec.message_id, shard)
        assert all(ids.mailbox_shard(TENANT, u, SHARDS) == shard for u in dispatch.recipients)
    assert sorted(u for _, d in first for u in d.recipients) == users


def test_by_shard_groups_each_user_once_sorted():
    grouped = by_shard(TENANT, [5, 3, 5, 9, 3], SHARDS)
    assert sorted(u for us in grouped.values() for u in us) == [3, 5, 9]
    assert list(grouped) == sorted(grouped) and all(list(us) == sorted(us) for us in grouped.values())


def test_records_that_cannot_be_planned_are_plan_errors_never_skipped():
    with pytest.raises(PlanError, match="undecodable"):
        parse_outbox(b"\xff\xff\xff", SHARDS)
    with pytest.raises(PlanError, match="shard_count=16, fanout runs 8"):
        parse_outbox(outbox(shard_count=16), SHARDS)
    with pytest.raises(PlanError, match="without message_id or audience"):
        parse_outbox(outbox(recipients=[]), SHARDS)
    for bad in (b"", bytes(16), b"\x01" * 15):  # none, kind 0, short
        with pytest.raises(PlanError, match="without a conversation_id"):
            parse_outbox(outbox(record=record(conversation_id=bad)), SHARDS)
    group = parse_outbox(outbox(recipients=[], group_conversation_id=ids.conversation_id_group(0, 4),
                                membership_version=3), SHARDS)
    assert tuple(snapshot_key(group)) == (TENANT, ids.conversation_id_group(0, 4), 3)
    with pytest.raises(PlanError, match="without its member snapshot"):
        plan(group, SHARDS)


class Groups:
    """Stand-in group store: snapshot members by key, counting reads."""

    def __init__(self, snapshots: dict) -> None:
        self.snapshots_by_key = snapshots
        self.reads: list[list] = []

    async def snapshots(self, keys):
        self.reads.append(list(keys))
        return [self.snapshots_by_key.get(tuple(k)) for k in keys]


async def test_the_member_snapshot_cache_reads_each_version_once_and_stays_bounded():
    conv = ids.conversation_id_group(0, 4)
    keys = [(TENANT, conv, v) for v in range(1, 4)]
    store = Groups({k: [10 * k[2] + i for i in range(5)] for k in keys})
    cache = MemberSnapshotCache(store, SHARDS, capacity=2)
    got = await cache.load({keys[0], keys[1]})
    assert got[keys[0]] == by_shard(TENANT, [10, 11, 12, 13, 14], SHARDS) and len(store.reads) == 1
    await cache.load({keys[0]})
    assert len(store.reads) == 1  # a version never changes: cached
    await cache.load({keys[2]})  # evicts the least recently used (keys[1])
    await cache.load({keys[1]})
    assert [len(r) for r in store.reads] == [2, 1, 1]
    with pytest.raises(PlanError, match="version 9 of a group is missing"):
        await cache.load({(TENANT, conv, 9)})
