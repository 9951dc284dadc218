"""The archive tier's own contract (docs/design.md §3, §5 step 7, §8): pages across
the hot floor have no gap and no duplicate whatever the floor and the page size, a trim
racing readers never opens a gap, a recall of an archived message is visible at once and
reaches the archive, the trimmer never drops what the archive does not hold, u64 values
stay exact, TTLs follow the retention class, the watermark and the archiver position
only move as allowed. Real Redis and the shared Cassandra node."""

from __future__ import annotations

import asyncio
import random

import pytest

from qim.consts import DAY_MS, U63_MAX
from qim.proto.v1 import message_pb2
from qim.services.archiver.plan import plan
from qim.services.writer.trimmer import trim_prefix
from qim.stores.archive import ArchiveRecord
from qim.stores.errors import CheckpointConflict, NotOwner, StoreUnavailable
from qim.stores.messages import NEWER, OLDER, MessageRef
from qim.stores.open import ArchiveTier, TieredStores
from qim.stores.redis.backend import RedisBackend
from tests.stores.archived import truncate
from tests.stores.conftest import direct, group, now_ms

GAP = ((0, 7), (11, None))  # a member who left at 7 and re-joined after 11


@pytest.fixture
async def tiered(store_engines):
    """TieredStores over an emptied Redis and archive."""
    redis = RedisBackend(store_engines["redis"])
    tier = ArchiveTier(redis.client, store_engines["cql"])
    stores = TieredStores(redis, tier, tiered_reads=True)
    await redis.client.flushdb()
    await tier.apply_schema()
    await truncate(tier)
    yield stores
    await stores.close()


async def archive_all(stores: TieredStores, conv) -> list[message_pb2.MessageRecord]:
    """Archive every hot message of `conv` as the archiver would; returns the records."""
    tier = stores.archive_tier
    _, rows = await tier.state.hot_rows(conv.tenant, conv.conversation_id, 100_000)
    recs = [(await stores.redis.messages.get(conv.tenant, conv.conversation_id, r.message_id)).record for r in rows]
    for tenant, batch in plan(recs, {}, 30, now_ms()).items():
        await tier.archive.write(tenant, batch.records, batch.changes)
    return recs


async def trim_to(stores: TieredStores, conv, seq: int) -> int:
    """Trim `conv` up to `seq` with the writer's check; the floor after."""
    tier = stores.archive_tier
    floor, rows = await tier.state.hot_rows(conv.tenant, conv.conversation_id, 100_000)
    rows = [r for r in rows if r.conversation_seq <= seq]
    res = await trim_prefix(tier.state, tier.archive, conv.tenant, conv.conversation_id, floor, rows, "default", 30,
                            now_ms())
    return res.floor


async def walk(store, conv, intervals, direction: int, limit: int, max_bytes: int = 1 << 20) -> list[int]:
    """Every seq a client sees paging from the start (NEWER) or the latest (OLDER)."""
    seen, anchor = [], 0
    for _ in range(1000):
        page = await store.history_page(conv.tenant, conv.conversation_id, intervals, anchor, direction, limit,
                                        max_bytes)
        seen += [r.conversation_seq for r in page.records]
        if not page.has_more:
            return seen
        anchor = page.records[-1].conversation_seq
    raise AssertionError("paging did not end")


@pytest.mark.parametrize("floor", [0, 1, 6, 7, 11, 12, 19, 20])
async def test_pages_across_the_floor_have_no_gap_and_no_duplicate(tiered, floor):
    c = group(tiered)
    for n in range(20):
        await c.send(5, bytes([n]) * (10 + n * 37))
    await archive_all(tiered, c)
    assert await trim_to(tiered, c, floor) == floor
    for intervals in (((0, None),), GAP, ((3, 15),)):
        want = [s for s in range(1, 21) if any(s > lo and (hi is None or s <= hi) for lo, hi in intervals)]
        for limit in (1, 3, 7, 50):
            assert await walk(tiered.messages, c, intervals, NEWER, limit) == want
            assert await walk(tiered.messages, c, intervals, OLDER, limit) == want[::-1]
        assert await walk(tiered.messages, c, intervals, NEWER, 50, 300) == want  # byte budget across the seam
    hot = await tiered.redis.messages.history_page(c.tenant, c.conversation_id, ((0, None),), 0, NEWER, 50, 1 << 20)
    assert [r.conversation_seq for r in hot.records] == list(range(floor + 1, 21))
    page = await tiered.messages.history_page(c.tenant, c.conversation_id, ((0, None),), 0, NEWER, 50, 1 << 20)
    # byte-exact: the archive gives back the very records Redis held
    assert [r.SerializeToString() for r in page.records[floor:]] == [r.SerializeToString() for r in hot.records]
    assert await tiered.messages.latest_seq(c.tenant, c.conversation_id, ((0, 3),)) == 3


async def test_every_record_read_from_the_archive_equals_the_one_redis_held(tiered):
    c = direct(tiered)
    for n in range(12):
        await c.send(5 if n % 2 else 9, bytes(random.randrange(256) for _ in range(50 + n)))
    before = await tiered.redis.messages.history_page(c.tenant, c.conversation_id, ((0, None),), 0, NEWER, 50, 1 << 20)
    await archive_all(tiered, c)
    assert await trim_to(tiered, c, 12) == 12
    assert await tiered.redis.messages.latest_seq(c.tenant, c.conversation_id, ((0, None),)) is None  # all trimmed
    after = await tiered.messages.history_page(c.tenant, c.conversation_id, ((0, None),), 0, NEWER, 50, 1 << 20)
    assert [r.SerializeToString() for r in after.records] == [r.SerializeToString() for r in before.records]
    refs = [MessageRef(c.conversation_id, r.message_id) for r in before.records]
    records, states = await tiered.messages.resolve(c.tenant, refs, refs)
    assert [r.SerializeToString() for r in records] == [r.SerializeToString() for r in before.records]
    assert states == [0] * 12
    assert await tiered.messages.record_sizes(c.tenant, refs) == [r.ByteSize() for r in before.records]


async def test_a_trim_racing_readers_never_opens_a_gap(tiered):
    c = direct(tiered)
    for n in range(120):
        await c.send(5, b"m%d" % n)
    await archive_all(tiered, c)
    stop = asyncio.Event()

    async def trimmer():
        for seq in range(0, 121, 3):
            await trim_to(tiered, c, seq)
            await asyncio.sleep(0)
        stop.set()

    async def reader(direction):
        walks = 0
        while not stop.is_set():
            assert await walk(tiered.messages, c, ((0, None),), direction, 7) == (
                list(range(1, 121)) if direction == NEWER else list(range(120, 0, -1)))
            walks += 1
        return walks

    _, n1, n2 = await asyncio.gather(trimmer(), reader(NEWER), reader(OLDER))
    assert n1 + n2 > 0
    assert (await tiered.archive_tier.state.floors(c.tenant, [c.conversation_id]))[0] == 120


@pytest.mark.parametrize("state", [message_pb2.MESSAGE_STATE_RECALLED, message_pb2.MESSAGE_STATE_DELETED])
async def test_a_recall_of_an_archived_message_is_seen_at_once_and_reaches_the_archive(tiered, state):
    from qim.stores.commits import StateChange

    c = direct(tiered)
    sent = await c.send(5, b"secret")
    await c.send(9, b"reply")
    await archive_all(tiered, c)
    assert await trim_to(tiered, c, 2) == 2
    stored = await tiered.messages.get(c.tenant, c.conversation_id, sent.message_id)
    assert stored.version == "" and stored.record.body == b"secret"  # read from the archive
    recalled = message_pb2.MessageRecord()
    recalled.CopyFrom(stored.record)
    recalled.body, recalled.state = b"", state
    body = message_pb2.ControlEvent(state_change=message_pb2.MessageStateChange(
        message_id=sent.message_id, state=recalled.state, conversation_seq=1)).SerializeToString()
    res = c.reservation(5, b"r" * 16, body, message_type=4)
    reserved = await tiered.commits.reserve_state_change(
        res, StateChange(sent.message_id, "", recalled.SerializeToString(), recalled.state))
    await c.commit(reserved, res.ref)
    ref = MessageRef(c.conversation_id, sent.message_id)

    async def seen():
        page = await tiered.messages.history_page(c.tenant, c.conversation_id, ((0, None),), 0, NEWER, 10, 1 << 20)
        records, states = await tiered.messages.resolve(c.tenant, [ref], [ref])
        got = await tiered.messages.get(c.tenant, c.conversation_id, sent.message_id)
        return ((page.records[0].state, page.records[0].body), (records[0].state, records[0].body), states[0],
                (got.record.state, got.record.body))

    recalled_view = ((state, b""), (state, b""), state, (state, b""))
    assert await seen() == recalled_view  # before the archiver applied it: the Redis state is overlaid
    # a second recall of the same archived message finds it changed
    from qim.stores.errors import RecordChanged
    with pytest.raises(RecordChanged):
        await tiered.commits.reserve_state_change(c.reservation(5, b"s" * 16, body, message_type=4),
                                                  StateChange(sent.message_id, "", b"", recalled.state))
    # the trim stops below the CONTROL message until the archive holds the state
    assert await trim_to(tiered, c, 3) == 2
    await archive_all(tiered, c)
    assert await trim_to(tiered, c, 3) == 3
    assert not await tiered.redis.client.keys("qim:msgst:*")  # the Redis state is gone: the archive has it
    assert await seen() == recalled_view
    rec = (await tiered.archive_tier.archive.records(c.tenant, [sent.message_id]))[0]
    assert rec.state == state and rec.body == b""


async def test_the_trim_keeps_what_the_archive_does_not_hold(tiered):
    c = direct(tiered)
    for n in range(6):
        await c.send(5, b"x%d" % n)
    recs = await archive_all(tiered, c)
    tier = tiered.archive_tier
    # the archive misses seq 4 (a commit published late): the trim stops before it
    await tier.cql.session.execute(f"DELETE FROM {tier.cql.session.keyspace}.conversation_history WHERE tenant = %s "
                                   "AND conversation_id = %s AND bucket = 0 AND conversation_seq = 4",
                                   (c.tenant.to_bytes(16, "big"), c.conversation_id))
    assert await trim_to(tiered, c, 6) == 3
    # a message past its retention may go without an archive row
    old = message_pb2.MessageRecord()
    old.CopyFrom(recs[3])
    floor, rows = await tier.state.hot_rows(c.tenant, c.conversation_id, 10)
    res = await trim_prefix(tier.state, tier.archive, c.tenant, c.conversation_id, floor, rows, "ephemeral_24h", 30,
                            recs[3].created_at_ms + DAY_MS + 1)
    assert res.floor == 6 and res.trimmed == 3
    assert await walk(tiered.messages, c, ((0, None),), NEWER, 2) == [1, 2, 3, 5, 6]


async def test_u64_values_stay_exact_and_bit_63_never_reaches_cql(tiered):
    tier = tiered.archive_tier
    conv = direct(tiered).conversation_id
    rec = message_pb2.MessageRecord(tenant_id=(7).to_bytes(16, "big"), message_id=b"\x01" * 6 + bytes(10),
                                    conversation_id=conv, conversation_seq=U63_MAX, sender_id=U63_MAX,
                                    sender_device_id=U63_MAX - 1, created_at_ms=1_000, body=b"edge")
    await tier.archive.write(7, [ArchiveRecord(rec, 0)], [])
    got = (await tier.archive.records(7, [rec.message_id]))[0]
    assert got.SerializeToString() == rec.SerializeToString()
    assert (await tier.cold.history_page(7, conv, ((U63_MAX - 1, None),), 0, NEWER, 5, 1 << 20)).records == [rec]
    bad = message_pb2.MessageRecord()
    bad.CopyFrom(rec)
    bad.sender_id = U63_MAX + 1
    with pytest.raises(ValueError, match="bit 63"):
        await tier.archive.write(7, [ArchiveRecord(bad, 0)], [])


async def test_row_ttl_follows_the_retention_class(tiered):
    tier = tiered.archive_tier
    ks = tier.cql.session.keyspace
    conv = direct(tiered).conversation_id
    now = now_ms()
    recs = []
    for seq, cls in ((1, "default"), (2, "ephemeral_24h"), (3, "compliance_hold")):
        rec = message_pb2.MessageRecord(tenant_id=(7).to_bytes(16, "big"),
                                        message_id=(now - 1000).to_bytes(6, "big") + bytes([seq]) + bytes(9),
                                        conversation_id=conv, conversation_seq=seq, sender_id=5,
                                        created_at_ms=now - 1000, body=b"b")
        batch = plan([rec], {(7, conv): cls}, 30, now)[7]
        await tier.archive.write(7, batch.records, [])
        recs.append(rec)
    ttls = {}
    for rec in recs:
        row = await tier.cql.session.execute(f"SELECT TTL(body) FROM {ks}.message_record WHERE tenant = %s AND "
                                             "message_id = %s", ((7).to_bytes(16, "big"), rec.message_id))
        ttls[rec.conversation_seq] = row[0][0]
    assert 30 * 86400 - 60 < ttls[1] <= 30 * 86400
    assert 86400 - 60 < ttls[2] <= 86400
    assert ttls[3] is None  # compliance hold: no TTL
    past = message_pb2.MessageRecord()
    past.CopyFrom(recs[1])
    assert plan([past], {(7, conv): "ephemeral_24h"}, 30, now + DAY_MS)[7].expired == 1


async def test_watermark_only_moves_forward_and_the_position_is_compare_and_set(tiered):
    state = tiered.archive_tier.state
    assert await state.watermark() == 0
    assert await state.advance_watermark(500) == 500
    assert await state.advance_watermark(400) == 500
    assert await state.watermark() == 500
    ckpt = await state.position_bind("cluster|topic|1")
    assert (ckpt.status, ckpt.offsets) == ("NEW", [0])
    await state.position_advance("cluster|topic|1", 0, 10)
    await state.position_advance("cluster|topic|1", 0, 10)  # a retry after a lost reply
    with pytest.raises(CheckpointConflict):
        await state.position_advance("cluster|topic|1", 0, 20)
    assert (await state.position_bind("cluster|topic|1")).offsets == [10]
    assert (await state.position_bind("other|topic|1")).status == "MISMATCH"


async def test_per_partition_positions_are_fenced_and_the_watermark_is_the_lowest_partition(tiered):
    state = tiered.archive_tier.state  # docs/decisions/0041-scale-outbox-partitions.md
    assert await state.advance_watermark(900, 0, 2) == 0  # partition 1 archived nothing yet
    assert await state.advance_watermark(700, 1, 2) == 700
    assert await state.advance_watermark(1000, 1, 2) == 900
    assert await state.watermark() == 900
    assert (await state.position_bind("c|t|2", 1, owner_epoch=3)).status == "NEW"
    with pytest.raises(NotOwner):  # a paused archiver that lost the partition
        await state.position_advance("c|t|2", 0, 5, 1, owner_epoch=2)
    await state.position_advance("c|t|2", 0, 5, 1, owner_epoch=3)
    assert await state.position(1) == 5 and await state.position(0) is None


async def test_an_unreachable_archive_is_store_unavailable_below_the_floor(tiered, store_engines):
    from qim.config.tier import ScyllaConfig

    c = direct(tiered)
    for n in range(4):
        await c.send(5, b"y%d" % n)
    await archive_all(tiered, c)
    assert await trim_to(tiered, c, 2) == 2
    dead = TieredStores(RedisBackend(store_engines["redis"]),
                        ArchiveTier(tiered.redis.client, ScyllaConfig(("127.0.0.1",), 1, "qim_contract",
                                                                      allow_single_node_dev=True)), True)
    try:
        page = await dead.messages.history_page(c.tenant, c.conversation_id, ((0, None),), 2, NEWER, 10, 1 << 20)
        assert [r.conversation_seq for r in page.records] == [3, 4]  # above the floor: Redis alone
        for op in (dead.messages.history_page(c.tenant, c.conversation_id, ((0, None),), 0, NEWER, 10, 1 << 20),
                   dead.messages.latest_seq(c.tenant, c.conversation_id, ((0, 2),))):
            with pytest.raises(StoreUnavailable):
                await op
    finally:
        await dead.archive_tier.close()
        await dead.redis.close()


async def test_first_registrations_are_queued_once_and_reach_user_conversation_state(tiered, store_engines):
    from qim.stores.sessions import Registration

    conv = direct(tiered, a=5, b=9).conversation_id
    plain = RedisBackend(store_engines["redis"])  # without the archive tier nothing is queued
    try:
        await plain.sessions.register([Registration(7, 1, conv, 100, 0, 0)])
        assert await plain.sessions.pending_first(10) == []
    finally:
        await plain.close()
    queuing = RedisBackend(store_engines["redis"], first_registrations=True)
    try:
        sessions = queuing.sessions
        await sessions.register([Registration(7, 5, conv, 100, 0, 0)])  # the sender's own dispatch: no peer yet
        await sessions.register([Registration(7, 5, conv, 200, 0, 0)])  # not new: nothing queued
        await sessions.register([Registration(7, 5, conv, 300, 0, 9)])  # the peer learnt: queued again
        await sessions.register([Registration(7, 5, conv, 400, 0, 9)])
        pending = await sessions.pending_first(10)
        assert [(p.user, p.peer, p.first_seen_at_ms, p.kind) for p in pending] == [(5, 0, 100, 1), (5, 9, 300, 1)]
        ucs = tiered.archive_tier.conversations
        await ucs.register(pending[::-1])  # the row without the peer never erases it
        await sessions.done_first(pending)
        assert await sessions.pending_first(10) == []
        (row,) = await ucs.conversations(7, 5)
        assert (row.conversation_id, row.kind, row.peer) == (conv, 1, 9)
    finally:
        await queuing.close()


@pytest.mark.parametrize("limit", [2, 5, 6, 50])
async def test_a_newer_page_covers_a_trim_between_its_two_reads(tiered, limit):
    from qim.stores.tiered import TieredMessageStore

    c = direct(tiered)
    for n in range(10):
        await c.send(5, b"n%d" % n)
    await archive_all(tiered, c)
    assert await trim_to(tiered, c, 3) == 3
    hot = tiered.archive_tier.hot

    class Racing:
        """The hot tier, with a trim to seq 8 right after the floor was read."""

        def __getattr__(self, name):
            return getattr(hot, name)

        async def floor(self, tenant, conv):
            got = await hot.floor(tenant, conv)
            await trim_to(tiered, c, 8)
            return got

    store = TieredMessageStore(Racing(), tiered.archive_tier.cold)
    page = await store.history_page(c.tenant, c.conversation_id, ((0, None),), 1, NEWER, limit, 1 << 20)
    assert [r.conversation_seq for r in page.records] == list(range(2, 11))[:limit]
    assert page.has_more == (limit < 9)


async def test_a_busy_partitions_index_rows_go_in_bounded_batches_and_all_read_back(tiered, monkeypatch):
    """The index rows of one (conversation, bucket) are written as UNLOGGED batches within
    the row and byte limits, rows of other buckets apart; every row reads back exact,
    a large body included (one row alone past the byte limit goes as itself)."""
    from cassandra.query import BatchStatement

    from qim.consts import ARCHIVE_BUCKET_BITS, CQL_PARTITION_BATCH_BYTES, CQL_PARTITION_BATCH_ROWS

    tier = tiered.archive_tier
    conv = direct(tiered).conversation_id
    now = now_ms()
    seqs = list(range(1, 2 * CQL_PARTITION_BATCH_ROWS + 4)) + [1 << ARCHIVE_BUCKET_BITS]  # the last: next bucket
    bodies = {s: (b"%d-" % s) * (3 if s % 7 else CQL_PARTITION_BATCH_BYTES // 8) for s in seqs}
    bodies[5] = b"x" * (CQL_PARTITION_BATCH_BYTES + 1)
    recs = [message_pb2.MessageRecord(tenant_id=(7).to_bytes(16, "big"),
                                      message_id=(now - 1000).to_bytes(6, "big") + s.to_bytes(10, "big"),
                                      conversation_id=conv, conversation_seq=s, sender_id=5,
                                      created_at_ms=now - 1000, body=bodies[s]) for s in seqs]
    sent: list[list] = []
    plain = tier.cql.session.execute_many

    async def spy(calls, concurrency, what="write"):
        calls = list(calls)
        sent.append(calls)
        return await plain(calls, concurrency, what)

    monkeypatch.setattr(tier.cql.session, "execute_many", spy)
    await tier.archive.write(7, [ArchiveRecord(r, 0) for r in recs], [])
    index_calls = [c for c in sent[1] if isinstance(c[0], BatchStatement) or "conversation_history" in
                   c[0].query_string]
    batches = [c[0] for c in index_calls if isinstance(c[0], BatchStatement)]
    rows_in = sum(len(b._statements_and_parameters) for b in batches) + len(index_calls) - len(batches)
    assert rows_in == len(seqs)
    assert batches and all(len(b._statements_and_parameters) <= CQL_PARTITION_BATCH_ROWS for b in batches)
    assert len(index_calls) < len(seqs) // 4  # batched, not one request per row
    monkeypatch.undo()
    got = await tier.archive.history_rows(7, conv, seqs)
    assert [got[s].SerializeToString() for s in seqs] == [r.SerializeToString() for r in recs]
