"""A direct record overtakes the group records queued before it in its shard's FIFO
(docs/decisions/0142; issue 41 "direct messages never wait behind a group"). Real
Redis, the real materializer loop; the dispatch partition is test_lost_reply.py's
stand-in, and the group's fused calls wait at a gate the test opens: while they wait,
the direct record is in its recipient's mailbox, visible (its lane's W) and pushed,
and the group members of its lane already hold every group entry below it. Once the
gate opens every mailbox holds each entry once in offset order; a restart replays
the overtaken record as a DUPLICATE and the begun ones as RESUME."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from qim._core import ids, watermark
from qim._core import mailbox_seq as mseq
from qim._core.types import MessageCoord
from qim.faults import MAILBOX_POINTS, FaultPoints
from qim.services.mailbox.materializer import MailboxMaterializer
from qim.stores.mailboxes import day_of
from qim.stores.redis.mailboxes import RedisMailboxStore
from qim.wire.dispatch import Dispatch
from tests.mailbox.test_lost_reply import EPOCH, NOW_MS, SETTLE_S, SHARD, TENANT, DispatchLog, redis

__all__ = ["redis"]  # the fixture, shared with test_lost_reply.py

GROUP_RECORDS = 100  # offsets 0..99: more than three fused batches queued before the direct one
DIRECT_AT = GROUP_RECORDS
RECEIVER, SENDER = 5, 6
MEMBERS = tuple(range(1000, 1200))  # a group's share of one shard: every lane has some
LANE = ids.lane_id(TENANT, RECEIVER)
SAME_LANE = [u for u in MEMBERS if ids.lane_id(TENANT, u) == LANE]
OTHER_LANE = [u for u in MEMBERS if ids.lane_id(TENANT, u) != LANE]


class Gated(RedisMailboxStore):
    """The real store; the in-order batches' fused calls wait until `gate` is set (an
    overtake's call, which leaves records unfinished, goes through)."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.gate = asyncio.Event()
        self.fused_waiting = asyncio.Event()

    async def fused(self, *a: Any, **kw: Any) -> Any:
        if not kw.get("unfinished"):
            self.fused_waiting.set()
            await self.gate.wait()
        return await super().fused(*a, **kw)


def group_record(offset: int) -> bytes:
    coord = MessageCoord(b"G" + offset.to_bytes(15, "big"), ids.conversation_id_group(TENANT, 77), offset + 1,
                         MEMBERS[0], NOW_MS + offset, 1, b"")
    return Dispatch(TENANT, b"g" + offset.to_bytes(15, "big"), coord, SHARD, b"c" * 16, MEMBERS, None).encode()


def direct_record(offset: int) -> bytes:
    coord = MessageCoord(b"M" + offset.to_bytes(15, "big"), ids.conversation_id_direct(TENANT, SENDER, RECEIVER), 1,
                         SENDER, NOW_MS + offset, 1, b"")
    return Dispatch(TENANT, b"d" + offset.to_bytes(15, "big"), coord, SHARD, b"c" * 16, (RECEIVER,),
                    b"hello").encode()


def materializer(store: RedisMailboxStore, log: DispatchLog, pushes: list[int]) -> MailboxMaterializer:
    return MailboxMaterializer("unused:1", store, [SHARD], lambda t, seq, users, event, trace, inline: pushes.append(seq),
                               FaultPoints("", MAILBOX_POINTS), consumer=log, overtake=True)  # type: ignore[arg-type]


async def offsets_of(store: RedisMailboxStore, user: int) -> list[int]:
    return [o for _, o in await store.read_range(TENANT, user, [day_of(NOW_MS)], -1, 1 << 40, 1000)]


async def until(check: Any, what: str) -> None:
    deadline = time.monotonic() + SETTLE_S
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


def queued() -> DispatchLog:
    log = DispatchLog()
    for offset in range(GROUP_RECORDS):
        log.add(SHARD, offset, group_record(offset))
    log.add(SHARD, DIRECT_AT, direct_record(DIRECT_AT))
    return log


async def test_a_direct_record_is_delivered_while_the_group_records_before_it_wait(redis):
    assert SAME_LANE and OTHER_LANE  # the member set reaches the receiver's lane and others
    store, pushes = Gated(redis), list[int]()
    m = materializer(store, queued(), pushes)
    await m.start()
    task = asyncio.get_running_loop().create_task(m.run())
    try:
        state = m.shards[SHARD]

        async def delivered() -> bool:
            return mseq.compose(EPOCH, DIRECT_AT) in pushes

        await until(delivered, "the direct record waited behind the group records (no overtake)")
        assert not store.gate.is_set() and state.dirty == ""
        assert await offsets_of(store, RECEIVER) == [DIRECT_AT]
        assert watermark.visible_offset(state.blob, LANE) == DIRECT_AT  # a pull may show it
        for user in SAME_LANE:  # the group entries below it were appended first, in order
            assert await offsets_of(store, user) == list(range(GROUP_RECORDS))
        for user in OTHER_LANE[:5]:  # nothing shown or written past the waiting group records
            assert await offsets_of(store, user) == []
        other = ids.lane_id(TENANT, OTHER_LANE[0])
        assert watermark.visible_offset(state.blob, other) == -1
        assert pushes == [mseq.compose(EPOCH, DIRECT_AT)]

        store.gate.set()

        async def drained() -> bool:
            return watermark.start_offset(state.blob) > DIRECT_AT or bool(state.dirty)

        await until(drained, "the group records were not materialized after the gate opened")
        assert state.dirty == ""
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    for user in (*SAME_LANE, *OTHER_LANE[:5]):
        assert await offsets_of(store, user) == list(range(GROUP_RECORDS))
    assert await offsets_of(store, RECEIVER) == [DIRECT_AT]
    assert pushes == [mseq.compose(EPOCH, o) for o in (DIRECT_AT, *range(GROUP_RECORDS))]  # each once
    blob, _ = await store.load_watermark(SHARD)
    assert watermark.start_offset(blob) == DIRECT_AT + 1


async def test_a_restart_after_an_overtake_replays_without_a_second_entry(redis):
    store, pushes = Gated(redis), list[int]()
    m = materializer(store, queued(), pushes)
    await m.start()
    task = asyncio.get_running_loop().create_task(m.run())
    try:
        await until(lambda: _true(store.fused_waiting), "no batch reached the store")
        assert mseq.compose(EPOCH, DIRECT_AT) in pushes
    finally:  # the node dies with the group records begun (in lane LANE), none finished
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    blob, _ = await store.load_watermark(SHARD)
    assert watermark.start_offset(blob) == 0  # the other lanes never passed the group records
    again, pushes2 = RedisMailboxStore(redis), list[int]()
    m2 = materializer(again, queued(), pushes2)  # a new writer replays the whole partition
    await m2.start()
    task = asyncio.get_running_loop().create_task(m2.run())
    try:
        state = m2.shards[SHARD]

        async def drained() -> bool:
            return watermark.start_offset(state.blob) > DIRECT_AT or bool(state.dirty)

        await until(drained, "the replay did not finish")
        assert state.dirty == ""
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    for user in (*SAME_LANE, *OTHER_LANE[:5]):
        assert await offsets_of(again, user) == list(range(GROUP_RECORDS))
    assert await offsets_of(again, RECEIVER) == [DIRECT_AT]  # appended once, never again
    assert mseq.compose(EPOCH, DIRECT_AT) not in pushes2  # a DUPLICATE is not pushed twice


async def _true(event: asyncio.Event) -> bool:
    return event.is_set()


async def test_two_direct_records_overtake_together_and_their_lanes_hold_every_group_entry_below(redis):
    second = next(u for u in range(7, 10_000) if ids.lane_id(TENANT, u) not in (LANE, ids.lane_id(TENANT, SENDER)))
    lane2 = ids.lane_id(TENANT, second)
    log = DispatchLog()
    for offset in range(GROUP_RECORDS + 1):  # the first direct record at 60, the second at 101
        log.add(SHARD, offset, direct_record(offset) if offset == 60 else group_record(offset))
    coord = MessageCoord(b"N" + (101).to_bytes(15, "big"), ids.conversation_id_direct(TENANT, SENDER, second), 1,
                         SENDER, NOW_MS + 101, 1, b"")
    log.add(SHARD, 101, Dispatch(TENANT, b"e" + (101).to_bytes(15, "big"), coord, SHARD, b"c" * 16, (second,),
                                 b"hi").encode())
    store, pushes = Gated(redis), list[int]()
    m = materializer(store, log, pushes)
    await m.start()
    task = asyncio.get_running_loop().create_task(m.run())
    try:
        state = m.shards[SHARD]

        async def delivered() -> bool:
            return {mseq.compose(EPOCH, 60), mseq.compose(EPOCH, 101)} <= set(pushes)

        await until(delivered, "the direct records waited behind the group records")
        assert m._m.overtakes._value.get() == 2 and not store.gate.is_set()
        assert await offsets_of(store, RECEIVER) == [60] and await offsets_of(store, second) == [101]
        below = [o for o in range(GROUP_RECORDS + 1) if o != 60]  # every group record below the last overtaker
        for user in [*SAME_LANE, *(u for u in MEMBERS if ids.lane_id(TENANT, u) == lane2)]:
            assert await offsets_of(store, user) == below
        assert watermark.visible_offset(state.blob, LANE) == watermark.visible_offset(state.blob, lane2) == 101
        store.gate.set()

        async def drained() -> bool:
            return watermark.start_offset(state.blob) > 101 or bool(state.dirty)

        await until(drained, "the group records were not materialized after the gate opened")
        assert state.dirty == ""
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    for user in OTHER_LANE[:5]:
        assert await offsets_of(store, user) == [o for o in range(GROUP_RECORDS + 1) if o != 60]


async def test_without_overtakes_no_direct_offset_is_kept_after_its_record_left(redis):
    """`directs` holds the queued direct records only (decision 0148: the gate's urgency);
    before, with overtakes off (the default then) it kept every direct offset for ever."""
    log = queued()
    for offset in range(DIRECT_AT + 1, DIRECT_AT + 40):  # more direct records, some in one batch
        log.add(SHARD, offset, direct_record(offset) if offset % 3 else group_record(offset))
    pushes: list[int] = []
    m = MailboxMaterializer("unused:1", RedisMailboxStore(redis), [SHARD],
                            lambda t, seq, users, event, trace, inline: pushes.append(seq),
                            FaultPoints("", MAILBOX_POINTS), consumer=log, overtake=False)  # type: ignore[arg-type]
    await m.start()
    task = asyncio.get_running_loop().create_task(m.run())
    try:
        state = m.shards[SHARD]

        async def drained() -> bool:
            return watermark.start_offset(state.blob) > DIRECT_AT + 39 or bool(state.dirty)

        await until(drained, "the records were not materialized")
        assert state.dirty == "" and not state.queue
        assert list(state.directs) == []
        turns = {kind: m._m.turns.labels(kind=kind)._value.get() for kind in ("direct", "bulk")}
        assert turns["direct"] >= 1 and turns["direct"] + turns["bulk"] >= 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_lane_index_groups_each_lane_s_recipients_as_the_per_member_lanes_do():
    """overtake.lane_index (cached per recipients tuple) against the lane of each member
    computed one by one (ids.lane_id, BLAKE3): the same users in the same lanes."""
    from qim.services.mailbox.overtake import lane_index

    for recipients in (MEMBERS, (RECEIVER,), tuple(range(3, 3000, 7))):
        index = lane_index(TENANT, recipients)
        want: dict[int, list[int]] = {}
        for user in recipients:
            want.setdefault(ids.lane_id(TENANT, user), []).append(user)
        assert {lane: [recipients[i] for i in ix] for lane, ix in index.items()} == want
        assert sorted(i for ix in index.values() for i in ix) == list(range(len(recipients)))
    assert lane_index(TENANT + 1, MEMBERS) != lane_index(TENANT, MEMBERS)  # the tenant is part of a lane
