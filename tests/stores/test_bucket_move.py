"""`qimctl redis move-bucket` on three real Redis instances (docs/decisions/0113): layout
core=(a, b, c), mailbox=(c, a, b).

A commit bucket (a direct conversation's commits, idempotency keys, conversation_seq,
newest-id key, hot history, in-flight and unpublished sets; a group conversation of
the same bucket with its members) moves from a to b: every key of it is on b with its
TTL, nothing of it on a, other buckets untouched, a revocation cutoff b lacked copied;
a topology made before the move finds the bucket on b by itself; a retried send is
answered with its first ACK (no CONFLICT), a reserve below the conversation's newest id
is still refused (ids never go backwards) and the next send takes the next
conversation_seq. A bucket marked moving is refused on every core call, and only it;
a bad target, foreign keys on the target, a second move and a map naming an address
outside the core list are refused; a move that crashed after its mark or after its
switch is finished by running it again; growth from two core instances to three moves
nothing until a bucket is moved.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from qim._core import ids
from qim.cli import qimctl
from qim.config.redislayout import RedisLayout
from qim.infra.redis.client import connect
from qim.stores.commits import GroupSendCheck
from qim.stores.errors import ClockBehind, StoreCorrupt, StoreUnavailable
from qim.stores.redis.backend import RedisBackend
from qim.stores.redis.bucketmove import bucket_keys, move_bucket, pin_buckets
from qim.stores.redis.keys import CommitKeys, revocation_key
from qim.stores.redis.placement import PLACEMENT_KEY
from qim.stores.redis.shardmove import MoveRefused
from tests.stores.conftest import Conv
from tests.stores.test_topology_archive import layout3

TENANT = 7


def group_on(layout: RedisLayout, index: int, not_bucket: int = -1) -> tuple[int, bytes]:
    """(group id, conversation id) of a group whose bucket is on core instance `index`."""
    gid = 0
    while True:
        gid += 1
        conv = ids.conversation_id_group(TENANT, gid)
        b = CommitKeys(TENANT, conv).bucket
        if layout.core_index(b) == index and b != not_bucket:
            return gid, conv


def direct_in(bucket: int) -> tuple[int, bytes]:
    """(peer, conversation id) of a direct conversation of user 5 in commit bucket `bucket`."""
    peer = 5
    while True:
        peer += 1
        conv = ids.conversation_id_direct(TENANT, 5, peer)
        if CommitKeys(TENANT, conv).bucket == bucket:
            return peer, conv


async def fill(stores, layout) -> dict:
    """A group and a direct conversation of one bucket on a, a group of another bucket on a."""
    gid, gconv = group_on(layout, 0)
    bucket = CommitKeys(TENANT, gconv).bucket
    _, dconv = direct_in(bucket)
    g = Conv(stores, TENANT, gconv)
    await g.change(5, "create", [5, 9], version=None, joins=[5, 9])
    await g.send(9, b"in the group", group=GroupSendCheck(1, 9))
    d = Conv(stores, TENANT, dconv)
    for i in range(3):
        await d.send(5, b"hello %d" % i, cmid=b"cmid-%08d" % i)
    await d.send(5, b"in flight", cmid=b"inflight", commit=False)  # reserved, not yet committed
    other = Conv(stores, TENANT, group_on(layout, 0, not_bucket=bucket)[1])
    await other.change(5, "create", [5, 9], version=None, joins=[5, 9])
    return {"bucket": bucket, "group": g, "direct": d, "other": other}


def dumps(eng, keys) -> dict:
    c = eng.client()
    return {k: (c.dump(k), c.pttl(k) > 0) for k in keys}


async def test_a_bucket_moves_with_its_keys_and_a_conversation_goes_on_forward(redis_three):
    a, b, c = redis_three
    layout = layout3(redis_three)
    stores = RedisBackend(layout)
    await stores.load_placement()
    try:
        f = await fill(stores, layout)
        bucket, d = f["bucket"], f["direct"]
        keys = await bucket_keys(stores.topology.clients[a.addr], bucket)
        before = dumps(a, keys)
        assert len(keys) >= 15 and sum(ttl for _, ttl in before.values()) >= 4, keys
        untouched = {k: a.client().dump(k) for k in a.client().keys("qim:*") if k not in before}
        a.client().set(revocation_key(TENANT, 5, 0), 1_700_000_000, ex=3600)  # a cutoff from before b joined
        lines: list[str] = []
        done = await move_bucket(layout, connect, bucket, b.addr, lines.append, settle_s=0)
        assert done == {"source": a.addr, "keys": len(keys), "revocations": 1}, (done, lines)
        assert dumps(b, keys) == before and not (set(keys) & set(a.client().keys("qim:*")))
        assert {k: a.client().dump(k) for k in untouched} == untouched
        assert 0 < b.client().ttl(revocation_key(TENANT, 5, 0)) <= 3600
        assert a.client().hget(PLACEMENT_KEY, f"bucket:{bucket}") == b.addr.encode()

        # the running process finds the bucket on b by itself (its refresh)
        end = time.monotonic() + 10
        while stores.topology.core(bucket) is not stores.topology.clients[b.addr]:
            assert time.monotonic() < end, "the old topology did not pick up the move"
            await asyncio.sleep(0.1)
        # a retried send: its first ACK, no CONFLICT (the idempotency key moved)
        first = (await stores.commits.load([d.reservation(5, b"cmid-00000002", b"hello 2").ref]))[0]
        again = await stores.commits.reserve(d.reservation(5, b"cmid-00000002", b"hello 2"))
        assert not again.fresh and (again.message_id, again.conversation_seq) == (first.message_id, 3)
        # a reserve below the newest id is refused (the per-conversation clock key moved)
        newest = d.clock_ms
        d.clock_ms = newest - 1_000
        with pytest.raises(ClockBehind):
            await stores.commits.reserve(d.reservation(9, b"late", b"late"))
        d.clock_ms = newest
        assert (await d.send(9, b"after")).conversation_seq == 5  # after the reserved 4th
        assert (await f["group"].send(5, b"group after", group=GroupSendCheck(1, 5))).conversation_seq == 3
        assert await stores.commits.inflight_count() == 1  # the reserved one, found on b
        assert [seq for _, seq in (await stores.commits.stale(-1, 100)).commits] == [4]
    finally:
        await stores.close()


async def test_a_moving_bucket_is_refused_and_bad_moves_change_nothing(redis_three, monkeypatch, capsys):
    a, b, c = redis_three
    layout = layout3(redis_three)
    stores = RedisBackend(layout)
    try:
        f = await fill(stores, layout)
        bucket = f["bucket"]
        snapshot = {e.addr: set(e.client().keys("qim:*")) for e in redis_three}
        for var, value in (("QIM_REDIS_ADDR", a.addr), ("QIM_REDIS_CORE_ADDRS", ",".join(layout.core)),
                           ("QIM_REDIS_MAILBOX_ADDRS", ",".join(layout.mailbox))):
            monkeypatch.setenv(var, value)
        argv = ["redis", "move-bucket", "--bucket", str(bucket), "--to", "127.0.0.1:1"]
        assert await asyncio.get_running_loop().run_in_executor(None, qimctl.main, argv) == 2
        assert "--to 127.0.0.1:1 is not a core instance" in capsys.readouterr().err
        argv = ["redis", "move-bucket", "--bucket", str(bucket), "--to", b.addr, "--settle", "1"]
        assert await asyncio.get_running_loop().run_in_executor(None, qimctl.main, argv) == 2
        assert "--settle must be at least 5 s" in capsys.readouterr().err
        c.client().set(CommitKeys(TENANT, f["direct"].conversation_id).seq(), 1)  # another placement's key
        with pytest.raises(MoveRefused, match="already holds 1 key"):
            await move_bucket(layout, connect, bucket, c.addr, print, settle_s=0)
        c.client().delete(CommitKeys(TENANT, f["direct"].conversation_id).seq())
        assert {e.addr: set(e.client().keys("qim:*")) for e in redis_three} == snapshot
        assert not a.client().exists(PLACEMENT_KEY)

        # marked moving: every core call of the bucket refused once the mark is read, others served
        a.client().hset(PLACEMENT_KEY, mapping={f"moving:b{bucket}": b.addr, "v": 1})
        await stores.load_placement()
        with pytest.raises(StoreUnavailable, match=f"commit bucket {bucket} is being moved"):
            await f["direct"].send(5, b"refused")
        with pytest.raises(StoreUnavailable, match=f"commit bucket {bucket} is being moved"):
            await stores.groups.send_view(TENANT, f["group"].conversation_id, 9)
        with pytest.raises(StoreUnavailable):
            await stores.commits.inflight_count()
        assert (await f["other"].send(5, b"served")).conversation_seq == 2
        assert stores.topology.moving_buckets() == frozenset({bucket})
        with pytest.raises(MoveRefused, match=f"being moved to {b.addr}"):
            await move_bucket(layout, connect, bucket, c.addr, print, settle_s=0)
        with pytest.raises(MoveRefused, match=f"commit bucket {bucket} is being moved to {b.addr}: run"):
            await move_bucket(layout, connect, (bucket + 1) % 256, c.addr, print, settle_s=0)

        # a map naming an address outside the core list: refused whole, the old map stays
        a.client().hset(PLACEMENT_KEY, mapping={f"bucket:{(bucket + 1) % 256}": "127.0.0.1:1", "v": 2})
        with pytest.raises(StoreCorrupt, match="127.0.0.1:1 for a commit bucket, not a core instance"):
            await stores.load_placement()
        assert stores.topology.placement.current.version == 1
    finally:
        await stores.close()


async def test_a_bucket_move_that_crashed_is_finished_by_running_it_again(redis_three):
    a, b, c = redis_three
    layout = layout3(redis_three)
    stores = RedisBackend(layout)
    try:
        f = await fill(stores, layout)
        bucket, d = f["bucket"], f["direct"]
        keys = await bucket_keys(stores.topology.clients[a.addr], bucket)
        before = dumps(a, keys)
        # crashed after the mark, half way through the copy: one key on c is its own partial copy
        a.client().hset(PLACEMENT_KEY, mapping={f"moving:b{bucket}": c.addr, "v": 1})
        c.client().set(CommitKeys(TENANT, d.conversation_id).seq(), b"half")
        await move_bucket(layout, connect, bucket, c.addr, print, settle_s=0)
        assert dumps(c, keys) == before and not a.client().exists(*keys)
        # crashed after the switch: a key of the bucket still on a; the same command removes it
        a.client().set(CommitKeys(TENANT, d.conversation_id).seq(), 3)
        done = await move_bucket(layout, connect, bucket, c.addr, print, settle_s=0)
        assert done["leftovers"] == 1 and not a.client().exists(CommitKeys(TENANT, d.conversation_id).seq())
        # and back to its default instance: the map entry stays explicit (a pin outlives a longer list)
        await move_bucket(layout, connect, bucket, a.addr, print, settle_s=0)
        assert a.client().hget(PLACEMENT_KEY, f"bucket:{bucket}") == a.addr.encode() and dumps(a, keys) == before
        await stores.load_placement()
        assert (await d.send(5, b"back home")).conversation_seq == 5
    finally:
        await stores.close()


async def test_growing_from_two_core_instances_to_three_moves_nothing_until_a_bucket_is_moved(redis_three):
    a, b, c = redis_three
    two = RedisLayout(core=(a.addr, b.addr), mailbox=(a.addr,))
    three = RedisLayout(core=(a.addr, b.addr, c.addr), mailbox=(a.addr,))
    convs = [ids.conversation_id_group(TENANT, g) for g in range(1, 41)]
    s2 = RedisBackend(two)
    try:
        for conv in convs:
            await Conv(s2, TENANT, conv).send(5, b"x")
    finally:
        await s2.close()
    assert await pin_buckets(two, connect) == 256 and await pin_buckets(two, connect) == 0
    s3 = RedisBackend(three)  # the longer list rolled out: every bucket where it was
    try:
        await s3.load_placement()
        t3 = s3.topology
        assert [t3.addr_of(t3.core(bk)) for bk in range(256)] == [two.core[two.core_index(bk)] for bk in range(256)]
        moved = CommitKeys(TENANT, convs[0]).bucket
        await move_bucket(three, connect, moved, c.addr, print, settle_s=0)
        await s3.load_placement()
        assert t3.addr_of(t3.core(moved)) == c.addr
        seqs = [(await Conv(s3, TENANT, conv).send(9, b"y")).conversation_seq for conv in convs]
        assert seqs == [2] * len(convs)
        assert c.client().exists(CommitKeys(TENANT, convs[0]).seq())
        assert b"{b%03d}" % moved not in b"".join(a.client().keys("*") + b.client().keys("*"))
    finally:
        await s3.close()
