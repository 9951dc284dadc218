"""A shard's backlog materialized in one call (docs/decisions/0067): records queued
together take one fused call, the mailboxes hold every entry once in offset order, every
record is pushed once in order, and a lost reply of a whole batch is recognised by the
repeat (the shard goes on). Real Redis, the real materializer loop; the dispatch
partitions are tests/mailbox/test_lost_reply.py's stand-in."""

from __future__ import annotations

import asyncio
import time

from qim._core import watermark
from qim.consts import MAILBOX_BATCH_RECORDS
from qim.stores.redis.mailboxes import RedisMailboxStore
from tests.mailbox.test_lost_reply import SETTLE_S, SHARD, LostReplies, Node, offsets_of, record, redis, seq

__all__ = ["redis"]  # the fixture, shared with test_lost_reply.py

MEMBERS = (11, 12, 13)


class Counting(LostReplies):
    """The real store, counting the records of every fused call."""

    def __init__(self, client) -> None:
        super().__init__(client)
        self.calls: list[int] = []

    async def fused(self, shard, epoch, records, *a, **kw):
        self.calls.append(len(records))
        return await super().fused(shard, epoch, records, *a, **kw)


async def backlog(node: Node, count: int) -> None:
    """Queue `count` records at once and wait until W passed the last (or the shard stopped)."""
    for offset in range(count):
        node.log.add(SHARD, offset, record(offset, MEMBERS))
    state = node.m.shards[SHARD]
    deadline = time.monotonic() + SETTLE_S
    while not state.dirty and watermark.start_offset(state.blob) < count:
        assert time.monotonic() < deadline, "the backlog was not materialized"
        await asyncio.sleep(0.01)


async def test_a_backlog_takes_few_calls_and_every_entry_lands_once_in_order(redis):
    store = Counting(redis)
    count = 3 * MAILBOX_BATCH_RECORDS
    async with Node(store) as node:
        await backlog(node, count)
        assert node.m.shards[SHARD].dirty == ""
    assert sum(store.calls) == count
    assert len(store.calls) <= count // 4, f"one call per few records expected, got {store.calls}"
    assert max(store.calls) <= MAILBOX_BATCH_RECORDS
    for user in MEMBERS:
        assert await offsets_of(store, user) == list(range(count))
    assert node.pushes == [seq(o) for o in range(count)]
    blob, _ = await RedisMailboxStore(redis).load_watermark(SHARD)
    assert watermark.start_offset(blob) == count


async def test_a_lost_reply_of_a_batch_is_recognised_and_pushed_once(redis):
    store = LostReplies(redis)
    store.lose, store.mode = "fused", "applied-before-retry"
    async with Node(store) as node:
        await backlog(node, 40)
        assert node.m.shards[SHARD].dirty == "", "a shard only this node writes was stopped"
        assert node.m._m.retries._value.get() >= 1  # the loss really happened
    for user in MEMBERS:
        assert await offsets_of(store, user) == list(range(40))
    assert node.pushes == [seq(o) for o in range(40)]  # the recovered batch is pushed too, once


async def test_a_null_record_stops_its_shard_visibly(redis):
    """A record without a value (a tombstone, a stray producer) in a batch: the shard is
    marked dirty naming the batch, nothing of the batch is written."""
    store = Counting(redis)
    async with Node(store) as node:
        node.log.add(SHARD, 0, record(0, MEMBERS))
        node.log.add(SHARD, 1, None)  # type: ignore[arg-type]
        state = node.m.shards[SHARD]
        deadline = time.monotonic() + SETTLE_S
        while not state.dirty:
            assert time.monotonic() < deadline, "the shard neither stopped nor said why"
            await asyncio.sleep(0.01)
        assert state.dirty.startswith("offsets 0..1: TypeError")
    assert store.calls == []  # refused before the store was called
    for user in MEMBERS:
        assert await offsets_of(store, user) == []
