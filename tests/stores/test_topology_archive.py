"""The archive state, the clock leases and the room epoch on several standalone Redis
instances (docs/decisions/0096, 0101): three real instances, layout core=(a, b, c),
mailbox=(c, a, b). A conversation's hot floor, history, archived states and retention
class are on its commit bucket's core instance; the checkpoints, watermarks, trim queue,
leases and room epoch on the home (a). Each instance is looked at with a client of its
own; the same calls on one instance give the same answers."""

from __future__ import annotations

import os

import pytest

from qim.config.redislayout import RedisLayout
from qim.stores.archive import TrimResult
from qim.stores.redis.archive import RedisArchiveState, queue_member
from qim.stores.redis.keys import CommitKeys, trim_queue_key
from qim.stores.redis.leases import RedisClockLeases
from qim.stores.redis.rooms import RedisRoomEpochs
from qim.stores.redis.topology import RedisTopology, topology_of

TENANT = 7
T0 = 1_760_000_000_000  # created_at (ms) of the first message written


@pytest.fixture
def three(redis_three):
    """Three private Redis instances (tests/fixtures.py), stopped after the test."""
    return redis_three


def layout3(engs) -> RedisLayout:
    a, b, c = (e.addr for e in engs)
    return RedisLayout(core=(a, b, c), mailbox=(c, a, b), shard_count=8)


def conv_on(layout: RedisLayout, index: int, salt: int = 0) -> bytes:
    """A conversation_id whose commit bucket is on core instance `index`."""
    n = salt
    while True:
        conv = n.to_bytes(16, "big")
        if any(conv) and layout.core_index(CommitKeys(TENANT, conv).bucket) == index:
            return conv
        n += 1


def mid(ms: int) -> bytes:
    """A message_id created at `ms` (its first 48 bits, which history_trim.lua reads)."""
    return ms.to_bytes(6, "big") + os.urandom(10)


async def hot_write(topology: RedisTopology, conv: bytes, seqs: range) -> list[bytes]:
    """Messages `seqs` of `conv` into the hot history as the reserving scripts leave them
    (history index and record), on the conversation's instance; their ids."""
    keys = CommitKeys(TENANT, conv)
    client = topology.core(keys.bucket)
    ids = [mid(T0 + s * 1000) for s in seqs]
    for m, s in zip(ids, seqs):
        await client.zadd(keys.history(), {m: s})
        await client.set(keys.record(m), b"record")
    return ids


def where(engs, key: str) -> list[int]:
    """The indexes of the instances holding `key`."""
    return [i for i, e in enumerate(engs) if e.client().exists(key)]


async def scenario(topology: RedisTopology, convs: list[bytes]) -> list:
    """Every ArchiveStateStore call over `convs` (one per instance); what each answered."""
    state = RedisArchiveState(topology)
    seen: list = []
    for i, conv in enumerate(convs):
        await hot_write(topology, conv, range(1, 5))
        await state.set_retention(TENANT, conv, "ephemeral_24h" if i != 1 else "compliance_hold")
    await state.mark_archived(TENANT, {c: T0 + 1000 for c in convs})
    seen.append(await state.trim_candidates(T0 + 5000, 10))
    seen.append(await state.retention_classes(TENANT, [*convs, conv_on(topology.layout, 0, 1000)]))
    for conv in convs:
        floor, rows = await state.hot_rows(TENANT, conv, 10)
        seen.append((floor, [(r.conversation_seq, r.message_id[:6], r.state) for r in rows]))
        seen.append(await state.trim(TENANT, conv, rows[:2]))
    seen.append(await state.floors(TENANT, convs))
    seen.append(await topology.home.zrange(trim_queue_key(), 0, -1, withscores=True))
    for conv in convs:
        _, rows = await state.hot_rows(TENANT, conv, 10)
        seen.append(await state.trim(TENANT, conv, rows))
    seen.append(await state.floors(TENANT, convs))
    seen.append(await state.trim_candidates(T0 + 10_000, 10))  # every conversation trimmed whole: none
    seen.append(await state.position_bind("cluster|topic|2", 1))
    await state.position_advance("cluster|topic|2", 0, 40, 1)
    seen.append(await state.position(1))
    seen.append(await state.advance_watermark(T0, 0, 2))
    seen.append(await state.advance_watermark(T0 + 5, 1, 2))
    seen.append(await state.watermark())
    seen.append(await state.lease("trimmer", "tok", 60_000))
    return seen


async def test_archive_keys_land_on_their_instance_and_answer_as_on_one(three):
    layout = layout3(three)
    convs = [conv_on(layout, i) for i in range(3)]
    one = topology_of(three[0].addr)
    try:
        single = await scenario(one, convs)
    finally:
        await one.aclose()
    three[0].client().flushall()
    topology = topology_of(layout)
    try:
        spread = await scenario(topology, convs)
    finally:
        await topology.aclose()
    assert spread == single  # the same answers in the same order
    assert spread[2][0] == 0 and len(spread[2][1]) == 4  # hot_rows of the first conversation: 4 rows
    assert spread[3] == TrimResult(2, 2)
    assert spread[-4:-1] == [0, T0, T0]  # the archive watermark: the lowest over the partitions

    for i, conv in enumerate(convs):
        keys = CommitKeys(TENANT, conv)
        assert where(three, keys.retention()) == [i]
        assert where(three, keys.floor()) == [i]
        assert three[i].client().get(keys.floor()) == b"4"
        assert not any(e.client().exists(keys.history()) for e in three)  # trimmed whole
    for key in ("qim:archive:ckpt:p1", "qim:archive:watermark", "qim:archive:watermark:p0",
                "qim:archive:watermark:p1", "qim:archive:lease:trimmer"):
        assert where(three, key) == [0], key
    for e in three[1:]:  # nothing global off the home
        assert not [k for k in e.client().scan_iter(match="qim:archive:*")]


async def test_trim_off_the_home_keeps_the_queue_entry_while_hot_messages_remain(three):
    """The trim queue is on the home, the conversation on b: a trim that leaves 2 of 4
    messages queues the third's created_at; one that empties the history drops the entry."""
    layout = layout3(three)
    topology = topology_of(layout)
    conv = conv_on(layout, 1)
    member = queue_member(TENANT, conv)
    try:
        state = RedisArchiveState(topology)
        ids = await hot_write(topology, conv, range(1, 5))
        await state.mark_archived(TENANT, {conv: T0 + 1000})
        _, rows = await state.hot_rows(TENANT, conv, 10)
        assert await state.trim(TENANT, conv, rows[:2]) == TrimResult(2, 2)
        assert three[0].client().zscore(trim_queue_key(), member) == T0 + 3000
        assert not three[1].client().exists(CommitKeys(TENANT, conv).record(ids[0]))
        assert three[1].client().exists(CommitKeys(TENANT, conv).record(ids[2]))
        assert await state.trim(TENANT, conv, rows[2:]) == TrimResult(4, 2)
        assert three[0].client().zscore(trim_queue_key(), member) is None
    finally:
        await topology.aclose()


async def test_a_message_marked_while_the_queue_entry_is_dropped_stays_queued(three):
    """Decision 0101: the trim empties the history on b, then (before the home drops the
    queue entry) a new message is committed and the archiver marks it. Dropped blindly,
    it would never be trimmed; the look after the removal queues it again."""
    layout = layout3(three)
    topology = topology_of(layout)
    conv = conv_on(layout, 2)
    member = queue_member(TENANT, conv)
    try:
        state = RedisArchiveState(topology)
        await hot_write(topology, conv, range(1, 3))
        await state.mark_archived(TENANT, {conv: T0 + 1000})
        _, rows = await state.hot_rows(TENANT, conv, 10)
        home = topology.home
        zrem = home.zrem

        async def racing_zrem(*args, **kw):
            await hot_write(topology, conv, range(3, 4))  # committed after the trim's look
            await state.mark_archived(TENANT, {conv: T0 + 3000})  # ZADD LT: the entry is kept as it was
            return await zrem(*args, **kw)

        home.zrem = racing_zrem  # type: ignore[method-assign]
        assert await state.trim(TENANT, conv, rows) == TrimResult(2, 2)
        assert three[0].client().zscore(trim_queue_key(), member) == T0 + 3000
    finally:
        await topology.aclose()


async def test_clock_leases_and_room_epochs_are_on_the_home(three):
    layout = layout3(three)
    topology = topology_of(layout)
    try:
        leases = RedisClockLeases(topology)
        wid = await leases.take_writer_id(1, "tok", 60_000)
        window = await leases.lease_window(1, wid, T0, 1000, 0, 100)
        assert await leases.renew(1, wid, "tok", 60_000, window.end)
        assert await RedisRoomEpochs(topology).next_epoch_base() == 1
        assert await RedisRoomEpochs(topology).next_epoch_base() == 2
    finally:
        await topology.aclose()
    for key in (f"qim:writer-lease:1:{wid}", f"qim:hlc:1:{wid}", "qim:hlc:cluster", "qim:room:epoch-base"):
        assert where(three, key) == [0], key
    assert all(e.client().dbsize() == 0 for e in three[1:])
