"""The MailboxStore on several standalone Redis instances (docs/decisions/0096, 0097):
three real instances, layout core=(a, b, c), mailbox=(c, a, b), 8 MailboxShards. A
shard's DispatchProgress, its index and its watermark are on the shard's mailbox
instance (s mod 3), a user's mailboxes and day index on the instance of its
MailboxShard; each instance is looked at with a client of its own. The same calls on
one instance give the same answers; the calls of one event-loop iteration go as one
pipeline per instance; a shard's call naming a user placed on another instance is
refused with nothing written anywhere."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest

from qim._core import mailbox_seq as mseq
from qim.config.redislayout import RedisLayout
from qim.consts import DAY_MS
from qim.errors import MailboxDirty
from qim.stores.errors import StoreUnavailable
from qim.stores.mailboxes import FusedRecord, day_of
from qim.stores.redis.keys import days_key, dp_key, dpidx_key, mailbox_key, wm_key
from qim.stores.redis.mailboxes import RedisMailboxStore
from qim.stores.redis.scripts import Scripts
from qim.stores.redis.topology import RedisTopology, topology_of
from tests.stores.conftest import shard_users
from tests.stores.test_topology_archive import layout3, where

TENANT, EPOCH = 7, 1
DAY = day_of(time.time_ns() // 1_000_000) - 1
NOW_MS = (DAY + 2) * DAY_MS  # a fixed clock for retention reads: nothing expired
SHARDS = (0, 1, 2, 3)  # mailbox instances c, a, b, c


def seq8(offset: int) -> bytes:
    return mseq.to_bytes(mseq.compose(EPOCH, offset))


def records(shard: int, users: list[int]) -> list[FusedRecord]:
    """Two records of `shard` to its `users` (offsets 0 and 1)."""
    return [FusedRecord(TENANT, b"%d-%d" % (shard, o) * 4, b"g" * 32, o, seq8(o), DAY,
                        [(u, seq8(o) + b"e%d" % u) for u in users]) for o in (0, 1)]


def counting_sends(monkeypatch) -> Counter:
    """Count the pipelines Scripts sends, per client (one per instance)."""
    sends: Counter = Counter()
    send = Scripts._send

    async def counted(self, batch):
        sends[id(self._client)] += 1
        return await send(self, batch)
    monkeypatch.setattr(Scripts, "_send", counted)
    return sends


async def scenario(topology: RedisTopology, layout: RedisLayout, sends: Counter) -> list:
    """Every MailboxStore call over the shards of SHARDS and their users; what each answered."""
    m = RedisMailboxStore(topology)
    users = {s: shard_users(TENANT, s, 3) for s in SHARDS}
    seen: list = []
    # warm every instance's script cache, so the counted iteration below is one send each
    seen.append([await m.load_watermark(s, fence=0) for s in SHARDS])
    sends.clear()
    seen.append(await asyncio.gather(*(m.fused(s, EPOCH, records(s, users[s]), None, b"W%d" % s, writer=b"me")
                                       for s in SHARDS[:3])))
    seen.append(dict(sends))
    # the step-wise path on shard 3 (fenced append on its instance)
    seen.append(await m.begin(3, b"step" * 4, b"s" * 32, 5, seq8(5)))
    await m.append(TENANT, 5, DAY, [(u, seq8(5) + b"s%d" % u) for u in users[3]], shard=3)
    seen.append(await m.finish(3, EPOCH, b"step" * 4, None, b"W3", writer=b"me"))
    seen.append([await m.load_watermark(s) for s in SHARDS])
    # an unfenced append (tools) to users of every instance: one call per instance
    everyone = [u for s in SHARDS for u in users[s]]
    await m.append(TENANT, 7, DAY + 1, [(u, seq8(7) + b"u%d" % u) for u in everyone])
    for u in everyone:
        seen.append(await m.read_range(TENANT, u, [DAY, DAY + 1], -1, 1 << 40, 100))
        seen.append(await m.trim_and_days(TENANT, u, now_ms=NOW_MS))
    first = users[1][0]
    seen.append(await m.trim_entries(TENANT, first, DAY, [(seq8(0) + b"e%d" % first, 0)]))
    seen.append(await m.read_range(TENANT, first, [DAY, DAY + 1], -1, 1 << 40, 100))
    seen.append([await m.gc_dispatch_progress(s, 0) for s in SHARDS])  # offset 0's DispatchProgress
    return seen


async def test_mailbox_keys_land_on_their_shards_instance_and_answer_as_on_one(redis_three, monkeypatch):
    three = redis_three
    layout = layout3(three)
    sends = counting_sends(monkeypatch)
    one = topology_of(three[0].addr)
    try:
        single = await scenario(one, layout, sends)
    finally:
        await one.aclose()
    three[0].client().flushall()
    topology = topology_of(layout)
    try:
        spread = await scenario(topology, layout, sends)
        client_index = {id(c): [e.addr for e in three].index(a) for a, c in topology.clients.items()}
    finally:
        await topology.aclose()
    # the three fused calls of one iteration: one pipeline on one instance, one per instance on three
    assert list(single[2].values()) == [1]
    assert sorted(client_index[c] for c in spread[2]) == [0, 1, 2] and set(spread[2].values()) == {1}
    spread[2] = single[2] = None
    assert spread == single  # the same answers in the same order
    assert [s for s, _ in spread[1][0]] == ["FRESH", "FRESH"] and spread[4] is True
    assert spread[-1] == [1, 1, 1, 0]  # offset 0's DispatchProgress of the fused shards

    addrs = [e.addr for e in three]
    for s in SHARDS:
        at = addrs.index(layout.mailbox[s % 3])
        assert where(three, wm_key(s)) == [at], s
        assert where(three, dpidx_key(s)) == [at], s
        if s < 3:
            assert where(three, dp_key(s, b"%d-1" % s * 4)) == [at], s
        for u in shard_users(TENANT, s, 3):  # a user's mailbox is on its shard's instance
            for key in (days_key(TENANT, u), mailbox_key(TENANT, u, DAY), mailbox_key(TENANT, u, DAY + 1)):
                assert where(three, key) == [at], (s, key)


async def test_a_shards_call_naming_a_user_of_another_instance_is_refused_with_nothing_written(redis_three):
    """Shard 1 is on mailbox instance a, shard 0 on c: a record of shard 1 naming a user
    of shard 0 would write a mailbox off its instance in a call that cannot be atomic
    across instances (decision 0097). Refused before any write, on every instance."""
    three = redis_three
    layout = layout3(three)
    topology = topology_of(layout)
    m = RedisMailboxStore(topology)
    own, other = shard_users(TENANT, 1, 1)[0], shard_users(TENANT, 0, 1)[0]
    try:
        with pytest.raises(MailboxDirty, match="another Redis instance"):
            await m.fused(1, EPOCH, records(1, [own, other]), None, b"W1", writer=b"me")
        with pytest.raises(MailboxDirty, match="another Redis instance"):
            await m.append(TENANT, 0, DAY, [(own, seq8(0) + b"x"), (other, seq8(0) + b"y")], shard=1)
        assert [e.client().dbsize() for e in three] == [0, 0, 0]
        # the same record to the shard's own user goes through
        assert [s for s, _ in await m.fused(1, EPOCH, records(1, [own]), None, b"W1", writer=b"me")] == ["FRESH"] * 2
        assert len(await m.read_range(TENANT, own, [DAY], -1, 10, 10)) == 2
    finally:
        await topology.aclose()


async def test_an_instance_down_fails_only_the_calls_of_its_shards(redis_three):
    """Each instance coalesces its own calls: with shard 0's instance (c) stopped, the
    fused calls of shards 1 and 2 (instances a and b) made in the same event-loop
    iteration are written; shard 0's alone fails, typed (decision 0096: the others go on)."""
    three = redis_three
    layout = layout3(three)
    topology = topology_of(layout)
    m = RedisMailboxStore(topology)
    try:
        three[[e.addr for e in three].index(layout.mailbox[0])].stop()
        got = await asyncio.gather(*(m.fused(s, EPOCH, records(s, shard_users(TENANT, s, 2)), None, b"W%d" % s,
                                             writer=b"me") for s in (0, 1, 2)), return_exceptions=True)
        assert isinstance(got[0], StoreUnavailable)
        assert [[status for status, _ in g] for g in got[1:]] == [["FRESH", "FRESH"]] * 2
        assert [await m.load_watermark(s) for s in (1, 2)] == [(b"W1", EPOCH), (b"W2", EPOCH)]
    finally:
        await topology.aclose()
