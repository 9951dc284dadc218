"""CommitStore contract (docs/design.md §5.2; docs/decisions/0002, 0017): idempotency by
identity digest, reservation checks before any sequence is taken, the commit state
machine, resumption reads, the unpublished and in-flight indexes."""

from __future__ import annotations

import pytest

from qim.consts import COMMIT_HELPER_TTL_MS, UNPUBLISHED_SCAN_MAX
from qim.proto.v1 import message_pb2
from qim.stores.commits import COMMITTED, RECORDED, RESERVED, CommitRef, GroupSendCheck
from qim.stores.errors import (
    ClockBehind,
    Conflict,
    Forbidden,
    MembershipMoved,
    NotFound,
    NotRecorded,
    PreviousNotSequenced,
)
from qim.wire.outbox import stored_record
from tests.stores.conftest import direct, group, now_ms


async def test_a_fresh_reserve_records_and_a_retry_returns_the_same_commit(stores):
    c = direct(stores)
    res = c.reservation(5, b"c" * 16, b"hello")
    first = await stores.commits.reserve(res)
    assert (first.fresh, first.state, first.message_id, first.conversation_seq) == (True, RECORDED, res.message_id, 1)
    again = await stores.commits.reserve(c.reservation(5, b"c" * 16, b"hello"))  # a retry with a newer id
    assert (again.fresh, again.state, again.message_id, again.conversation_seq) == (False, RECORDED, res.message_id, 1)
    stored = await stores.messages.get(c.tenant, c.conversation_id, res.message_id)
    assert stored.record == message_pb2.MessageRecord.FromString(stored_record(res.record_prefix, 1))
    done = await stores.commits.mark_committed(res.ref, 41, COMMIT_HELPER_TTL_MS)
    assert (done.message_id, done.conversation_seq, done.created_at_ms) == (res.message_id, 1, res.created_at_ms)
    replay = await stores.commits.reserve(c.reservation(5, b"c" * 16, b"hello"))
    assert (replay.fresh, replay.state, replay.conversation_seq, replay.older) == (False, COMMITTED, 1, [])
    assert await stores.commits.mark_committed(res.ref, 41, COMMIT_HELPER_TTL_MS) == done  # idempotent


@pytest.mark.parametrize("case", ["other_content", "previous_pending", "clock_behind"])
async def test_refusals_happen_before_a_sequence_is_taken(stores, case):
    c = direct(stores)
    await c.send(5, b"first", cmid=b"a" * 16)  # seq 1
    if case == "other_content":
        res, error = c.reservation(5, b"a" * 16, b"other body"), Conflict
    elif case == "previous_pending":
        res, error = c.reservation(5, b"b" * 16, b"second", previous=b"z" * 16), PreviousNotSequenced
    else:
        newest = c.clock_ms
        res, error = c.reservation(9, b"b" * 16, b"late"), ClockBehind
        c.clock_ms = newest - 10  # another writer's clock is behind this conversation's newest id
        res = c.reservation(9, b"b" * 16, b"late")
    with pytest.raises(error) as refused:
        await stores.commits.reserve(res)
    if case == "clock_behind":
        assert refused.value.message_id == (await stores.commits.load([CommitRef(c.tenant, c.conversation_id, 5,
                                                                                 b"a" * 16)]))[0].message_id
    if case == "other_content":
        assert refused.value.message == "client_message_id reused with other content"
    c.clock_ms = now_ms() + 1000
    after = await c.send(9, b"next")
    assert after.conversation_seq == 2  # nothing consumed by the refusal


async def test_the_previous_send_of_the_device_must_hold_commit_state(stores):
    c = direct(stores)
    await c.send(5, cmid=b"p" * 16, commit=False)  # reserved, not yet committed: counts as sequenced
    reserved = await stores.commits.reserve(c.reservation(5, b"q" * 16, b"x", previous=b"p" * 16))
    assert reserved.fresh and reserved.conversation_seq == 2


async def test_split_mode_stops_at_reserved_and_record_moves_it_on(stores):
    c = direct(stores)
    res = c.reservation(5, b"s" * 16, b"split", split=True)
    reserved = await stores.commits.reserve(res)
    assert reserved.state == RESERVED
    assert await stores.messages.get(c.tenant, c.conversation_id, res.message_id) is None  # not yet recorded
    loaded = (await stores.commits.load([res.ref]))[0]
    assert loaded.state == RESERVED and loaded.record == stored_record(res.record_prefix, 1)
    with pytest.raises(NotRecorded):
        await stores.commits.mark_committed(res.ref, 1, COMMIT_HELPER_TTL_MS)
    assert await stores.commits.record(res.ref, res.message_id) == RECORDED
    assert await stores.commits.record(res.ref, res.message_id) == RECORDED  # idempotent
    assert (await stores.messages.get(c.tenant, c.conversation_id, res.message_id)).record.body == b"split"


async def test_load_reply_exists_and_vanished_commits(stores):
    c = direct(stores)
    res = c.reservation(5, b"l" * 16, b"body")
    await stores.commits.reserve(res)
    gone = CommitRef(c.tenant, c.conversation_id, 5, b"n" * 16)
    loaded, missing = await stores.commits.load([res.ref, gone])
    assert missing is None
    assert (loaded.state, loaded.message_id, loaded.conversation_seq, loaded.audience) == (
        RECORDED, res.message_id, 1, res.audience)
    assert message_pb2.MessageRecord.FromString(loaded.record).body == b"body"
    reply = await stores.commits.reply_of(res.ref)
    assert (reply.digest, reply.state, reply.conversation_seq) == (res.digest, RECORDED, 1)
    assert await stores.commits.reply_of(gone) is None
    assert await stores.commits.exists(res.ref) and not await stores.commits.exists(gone)
    with pytest.raises(NotFound):
        await stores.commits.mark_committed(gone, 1, COMMIT_HELPER_TTL_MS)
    with pytest.raises(NotFound):
        await stores.commits.record(gone, res.message_id)
    await stores.commits.mark_committed(res.ref, 3, COMMIT_HELPER_TTL_MS)
    committed = (await stores.commits.load([res.ref]))[0]
    assert committed.state == COMMITTED and committed.audience is None and committed.record is not None


async def test_unpublished_commits_are_listed_in_seq_order_until_committed(stores):
    c = direct(stores)
    c.token = "crashed-writer"
    r1 = await c.send(5, b"1", commit=False)
    r2 = await c.send(5, b"2", commit=False)
    assert r1.older == [] and [s for _, s in r2.older] == []  # only this writer's: it tracks its own
    c.token = "other-writer"
    res = c.reservation(9, b"o" * 16, b"3")
    r3 = await stores.commits.reserve(res)
    assert [seq for _, seq in r3.older] == [1, 2]  # another writer's reservations, oldest first
    assert all(ref.conversation_id == c.conversation_id and ref.sender_id == 5 for ref, _ in r3.older)
    listed = await stores.commits.unpublished(c.tenant, c.conversation_id, 3, UNPUBLISHED_SCAN_MAX)
    assert [seq for _, seq in listed] == [1, 2, 3] and listed[2][0] == res.ref
    for ref, _ in listed:
        await stores.commits.mark_committed(ref, 9, COMMIT_HELPER_TTL_MS)
    assert await stores.commits.unpublished(c.tenant, c.conversation_id, 3, UNPUBLISHED_SCAN_MAX) == []


async def test_stale_scan_and_inflight_count(stores):
    c = direct(stores)
    c.clock_ms = now_ms() - 7_260_000  # ids from a writer whose clock is 2 h 1 min behind
    res = c.reservation(5, b"t" * 16, b"stale")
    await stores.commits.reserve(res)
    split = c.reservation(9, b"u" * 16, b"split", split=True)
    await stores.commits.reserve(split)
    assert await stores.commits.inflight_count() == 2
    # the age is the store's own clock since the reserve, whatever clock issued the ids
    assert (await stores.commits.stale(60_000, 64)).commits == []
    scan = await stores.commits.stale(0, 64)
    assert sorted(scan.commits) == sorted([(res.ref, 1), (split.ref, 2)]) and scan.unreadable == 0
    for ref in (res.ref, split.ref):
        if ref == split.ref:
            await stores.commits.record(ref, split.message_id)
        await stores.commits.mark_committed(ref, 1, COMMIT_HELPER_TTL_MS)
    assert await stores.commits.inflight_count() == 0


async def test_a_stale_entry_whose_commit_hash_expired_leaves_its_in_flight_set(stores):
    """The scan names each stale commit with its bucket: one whose hash is gone (expired)
    is dropped from that bucket's in-flight ZSET, the others are returned to resume."""
    from qim.stores.redis.keys import CommitKeys

    a, b = direct(stores, a=5, b=9), direct(stores, a=6, b=11)  # two conversations, two buckets
    keys_a, keys_b = CommitKeys(a.tenant, a.conversation_id), CommitKeys(b.tenant, b.conversation_id)
    assert keys_a.bucket != keys_b.bucket
    gone, live = a.reservation(5, b"g" * 16, b"gone"), b.reservation(6, b"l" * 16, b"live")
    await stores.commits.reserve(gone)
    await stores.commits.reserve(live)
    # each bucket's keys on the core instance holding it (one instance but for "redis3")
    topology = (stores if hasattr(stores, "topology") else stores.redis).topology
    client_a, client_b = topology.core(keys_a.bucket), topology.core(keys_b.bucket)
    await client_a.delete(keys_a.commit(5, b"g" * 16))
    scan = await stores.commits.stale(0, 64)
    assert scan.commits == [(live.ref, 1)]
    assert await client_a.zcard(keys_a.inflight()) == 0 and await client_b.zcard(keys_b.inflight()) == 1
    assert await stores.commits.inflight_count() == 1


async def test_group_sends_are_checked_against_membership_atomically(stores):
    g = group(stores)
    await g.change(5, "create", [5, 6], joins=[5, 6])  # version 1
    ok = await g.send(6, b"member", group=GroupSendCheck(1, 6))
    assert ok.fresh
    with pytest.raises(Forbidden):
        await g.send(7, b"stranger", group=GroupSendCheck(1, 7))
    await g.change(5, "edit", [5, 6, 7], version=1, joins=[7])  # version 2
    with pytest.raises(MembershipMoved):
        await g.send(6, b"planned with v1", group=GroupSendCheck(1, 6))
    assert (await g.send(7, b"joined", group=GroupSendCheck(2, 7))).fresh
