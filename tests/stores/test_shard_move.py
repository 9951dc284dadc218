"""`qimctl redis move-shard` on three real Redis instances (docs/decisions/0104): layout
core=(a, b, c), mailbox=(c, a, b), 8 MailboxShards; shard 1 lives on a, shard 2 on b.

Shard 1 (mailbox entries, DispatchProgress, watermark, a session epoch, a queued first
registration) moves to b: everything of it is on b afterwards with its TTLs, nothing of
it left on a, shard 2's keys on b untouched, the stores answer as before, a topology
made before the move finds the shard on b by itself, and the shard's previous owner is
fenced out. A shard marked moving is refused on every call; a target that is not a
mailbox instance, or that holds keys of the shard, is refused with nothing changed; a
move that crashed after its mark (a partial copy on the target) or after its switch
(leftovers on the source) is finished by running it again, and a move back to its
default instance keeps the map entry explicit."""

from __future__ import annotations

import asyncio
import time

import pytest

from qim._core import mailbox_seq as mseq
from qim.cli import qimctl
from qim.config.redislayout import RedisLayout
from qim.consts import DAY_MS
from qim.infra.redis.client import connect
from qim.stores.errors import NotOwner, StoreUnavailable
from qim.stores.mailboxes import FusedRecord, day_of
from qim.stores.redis.keys import (
    mailbox_key,
    registry_shard_key,
    session_epoch_key,
    session_shard_checkpoint_key,
    ucs_pending_key,
    wm_key,
)
from qim.stores.redis.mailboxes import RedisMailboxStore
from qim.stores.redis.placement import PLACEMENT_KEY
from qim.stores.redis.registry import RedisShardRegistry
from qim.stores.redis.shardmove import MoveRefused, move_shard, pin_shards
from qim.stores.redis.topology import topology_of
from tests.stores.conftest import shard_users
from tests.stores.test_topology_archive import layout3

TENANT, EPOCH = 7, 1
DAY = day_of(time.time_ns() // 1_000_000) - 1
NOW_MS = (DAY + 2) * DAY_MS


def seq8(offset: int) -> bytes:
    return mseq.to_bytes(mseq.compose(EPOCH, offset))


def records(shard: int, users: list[int]) -> list[FusedRecord]:
    return [FusedRecord(TENANT, b"%d-%d" % (shard, o) * 4, b"g" * 32, o, seq8(o), DAY,
                        [(u, seq8(o) + b"e%d" % u) for u in users]) for o in (0, 1)]


def instance_keys(eng) -> set[bytes]:
    return set(eng.client().keys("qim:*"))


async def fill(layout, users) -> list:
    """Shards 1 and 2 written through the stores by owners of owner_epoch 1; what a reader sees."""
    t = topology_of(layout)
    reg = RedisShardRegistry(t.home)
    try:
        await reg.join("mailbox", "m1", "inc1", 60_000, "", "")
        assert await reg.acquire("mailbox", "m1", "inc1", 60_000, [1, 2]) == {1: 1, 2: 1}
        await reg.release("mailbox", "m1", "inc1", [1, 2])  # as a keeper does for a shard marked moving
        m = RedisMailboxStore(t)
        for s in (1, 2):
            await m.load_watermark(s, fence=1)
            await m.fused(s, EPOCH, records(s, users[s]), None, b"W%d" % s, writer=b"me", fence=1)
        return await seen(m, users)
    finally:
        await t.aclose()


async def filled(redis_three) -> tuple:
    """The three-instance layout with shards 1 and 2 filled by `fill` (three users each):
    (layout, users by shard, what a reader sees, the first user of shard 1)."""
    layout = layout3(redis_three)
    users = {s: shard_users(TENANT, s, 3) for s in (1, 2)}
    return layout, users, await fill(layout, users), users[1][0]


async def seen(m: RedisMailboxStore, users) -> list:
    out = [await m.load_watermark(s) for s in (1, 2)]
    for s in (1, 2):
        for u in users[s]:
            out.append(await m.read_range(TENANT, u, [DAY], -1, 1 << 40, 100))
            out.append(await m.trim_and_days(TENANT, u, now_ms=NOW_MS))
    return out


async def test_a_shard_moves_with_everything_it_owns_and_its_old_owner_is_fenced(redis_three):
    a, b, c = redis_three
    layout, users, before, u1 = await filled(redis_three)
    a.client().set(session_epoch_key(TENANT, u1, 5), 9)
    a.client().zadd(ucs_pending_key(), {f"{TENANT:032x}:{u1}:{'ab' * 16}:0": 123.0})
    a.client().pexpire(mailbox_key(TENANT, u1, DAY), 3_600_000)
    other = {k: b.client().dump(k) for k in instance_keys(b)}  # shard 2's keys on the target
    moved = {k for k in instance_keys(a) if b"{s1}" in k or any(b":%d" % u in k for u in users[1])}
    assert len(moved) >= 9, moved
    moved.add(session_shard_checkpoint_key(1).encode())  # written by the move's fence

    early = topology_of(layout)  # a process that read the map before the move
    await early.load_placement()
    assert early.shard(1) is early.clients[a.addr]
    lines: list[str] = []
    try:
        done = await move_shard(layout, connect, a.addr, 1, b.addr, lines.append, settle_s=0)
        assert done["source"] == a.addr and done["keys"] == len(moved) and done["rows"] == 1, (done, lines)
        # everything of shard 1 on b, nothing on a; shard 2's keys on b as they were
        assert moved <= instance_keys(b) and not (moved & instance_keys(a))
        assert {k: b.client().dump(k) for k in other} == other
        assert 0 < b.client().pttl(mailbox_key(TENANT, u1, DAY)) <= 3_600_000
        assert b.client().get(session_epoch_key(TENANT, u1, 5)) == b"9"
        assert b.client().zscore(ucs_pending_key(), f"{TENANT:032x}:{u1}:{'ab' * 16}:0") == 123.0
        assert not a.client().zrange(ucs_pending_key(), 0, -1)
        placement = a.client().hgetall(PLACEMENT_KEY)
        assert placement[b"shard:1"] == b.addr.encode() and b"moving:1" not in placement
        # the hold was under owner_epoch 2 and is free again
        lease = a.client().hgetall(registry_shard_key("mailbox", 1))
        assert lease[b"epoch"] == b"2" and lease[b"node"] == b"" and b.client().hget(wm_key(1), "oe") == b"2"

        # the process that read the map before finds shard 1 on b by itself (a refresh)
        end = time.monotonic() + 10
        while early.shard(1) is not early.clients[b.addr]:
            assert time.monotonic() < end, "the old topology did not pick up the move"
            await asyncio.sleep(0.1)
        assert await seen(RedisMailboxStore(early), users) == before
        # the owner of owner_epoch 1 is fenced out on the new instance
        with pytest.raises(NotOwner):
            await RedisMailboxStore(early).load_watermark(1, fence=1)
    finally:
        await early.aclose()


async def test_a_moving_shard_is_refused_and_a_bad_target_changes_nothing(redis_three, monkeypatch, capsys):
    a, b, c = redis_three
    layout = layout3(redis_three)
    users = {s: shard_users(TENANT, s, 3) for s in (1, 2)}
    await fill(layout, users)
    snapshot = {e.addr: instance_keys(e) for e in redis_three}

    # a target that is not a mailbox instance of the layout: qimctl exits 2 naming it
    for var, value in (("QIM_REDIS_ADDR", a.addr), ("QIM_REDIS_CORE_ADDRS", ",".join(layout.core)),
                       ("QIM_REDIS_MAILBOX_ADDRS", ",".join(layout.mailbox)), ("QIM_MAILBOX_SHARD_COUNT", "8")):
        monkeypatch.setenv(var, value)
    argv = ["redis", "move-shard", "--shard", "1", "--to", "127.0.0.1:1"]
    assert await asyncio.get_running_loop().run_in_executor(None, qimctl.main, argv) == 2
    assert "--to 127.0.0.1:1 is not a mailbox instance" in capsys.readouterr().err
    # a target holding a key of the shard (another placement's): refused, nothing written
    c.client().set(session_epoch_key(TENANT, users[1][1], 1), 4)
    with pytest.raises(MoveRefused, match="already holds 1 key"):
        await move_shard(layout, connect, a.addr, 1, c.addr, print, settle_s=0)
    assert {e.addr: instance_keys(e) for e in (a, b)} == {e.addr: snapshot[e.addr] for e in (a, b)}
    assert not a.client().exists(PLACEMENT_KEY)

    # marked moving: every process refuses the shard (and only it) once it read the mark
    a.client().hset(PLACEMENT_KEY, mapping={"moving:1": b.addr, "v": 1})
    t = topology_of(layout)
    try:
        await t.load_placement()
        with pytest.raises(StoreUnavailable, match="MailboxShard 1 is being moved"):
            await RedisMailboxStore(t).read_range(TENANT, users[1][0], [DAY], -1, 1 << 40, 100)
        assert t.moving_shards() == frozenset({1})
        assert (await RedisMailboxStore(t).load_watermark(2))[0] is not None
        # another target than the one marked: refused, naming the one to finish
        with pytest.raises(MoveRefused, match=f"being moved to {b.addr}"):
            await move_shard(layout, connect, a.addr, 1, c.addr, print, settle_s=0)
    finally:
        await t.aclose()


async def test_a_move_that_crashed_is_finished_by_running_it_again(redis_three):
    a, b, c = redis_three
    layout, users, before, u1 = await filled(redis_three)
    # crashed after the mark, half way through the copy: one key on b is its own partial copy
    a.client().hset(PLACEMENT_KEY, mapping={"moving:1": b.addr, "v": 1})
    b.client().set(mailbox_key(TENANT, u1, DAY), b"half")
    await move_shard(layout, connect, a.addr, 1, b.addr, print, settle_s=0)
    t = topology_of(layout)
    try:
        await t.load_placement()
        assert t.shard(1) is t.clients[b.addr]
        assert await seen(RedisMailboxStore(t), users) == before
        # crashed after the switch: keys of shard 1 still on a; the same command removes them
        a.client().set(session_epoch_key(TENANT, u1, 3), 1)
        lines: list[str] = []
        done = await move_shard(layout, connect, a.addr, 1, b.addr, lines.append, settle_s=0)
        assert done["leftovers"] == 1 and not a.client().exists(session_epoch_key(TENANT, u1, 3)), lines
        # and back to its default instance: the map entry stays explicit (a pin outlives a longer list)
        await move_shard(layout, connect, a.addr, 1, a.addr, print, settle_s=0)
        assert a.client().hget(PLACEMENT_KEY, "shard:1") == a.addr.encode()
        await t.load_placement()
        assert t.shard(1) is t.clients[a.addr]
        assert await seen(RedisMailboxStore(t), users) == before
    finally:
        await t.aclose()


async def test_growing_from_two_mailbox_instances_to_three_moves_nothing_until_a_shard_is_moved(redis_three):
    a, b, c = redis_three
    two = RedisLayout(core=(a.addr,), mailbox=(a.addr, b.addr), shard_count=8)
    three = RedisLayout(core=(a.addr,), mailbox=(a.addr, b.addr, c.addr), shard_count=8)
    users = {s: shard_users(TENANT, s, 2) for s in range(8)}
    t2 = topology_of(two)
    try:
        m = RedisMailboxStore(t2)
        for s in range(8):
            await m.fused(s, EPOCH, records(s, users[s]), None, b"W%d" % s, writer=b"me")
        before = [await m.read_range(TENANT, u, [DAY], -1, 1 << 40, 100) for s in range(8) for u in users[s]]
    finally:
        await t2.aclose()
    assert await pin_shards(two, connect) == 8 and await pin_shards(two, connect) == 0
    t3 = topology_of(three)  # the longer list rolled out: every shard where it was
    try:
        await t3.load_placement()
        assert [t3.addr_of(t3.shard(s)) for s in range(8)] == [two.mailbox[s % 2] for s in range(8)]
        m = RedisMailboxStore(t3)
        assert [await m.read_range(TENANT, u, [DAY], -1, 1 << 40, 100) for s in range(8) for u in users[s]] == before
        await move_shard(three, connect, a.addr, 3, c.addr, print, settle_s=0)
        await t3.load_placement()
        assert t3.addr_of(t3.shard(3)) == c.addr and t3.addr_of(t3.shard(2)) == a.addr
        assert [await m.read_range(TENANT, u, [DAY], -1, 1 << 40, 100) for s in range(8) for u in users[s]] == before
        assert c.client().exists(wm_key(3)) and not b.client().exists(wm_key(3))
    finally:
        await t3.aclose()


async def test_a_service_that_cannot_read_the_map_refuses_shard_calls_until_it_can(redis_three):
    a, b, c = redis_three
    layout = layout3(redis_three)
    a.client().hset(PLACEMENT_KEY, "v", 1)  # a map exists (a shard was moved once)
    t = topology_of(layout)
    loop = asyncio.get_running_loop()
    try:
        await t.load_placement()  # a service: its refresh task runs from here
        assert t.shard(2) is t.clients[b.addr]
        await loop.run_in_executor(None, a.kill)  # the home, holding the map, goes away
        end = time.monotonic() + 30
        while True:
            try:
                t.shard(2)
            except StoreUnavailable as exc:
                assert "placement map has not been read" in str(exc)
                break
            assert time.monotonic() < end, "shard calls still served with a map that cannot be read"
            await asyncio.sleep(0.2)
        await loop.run_in_executor(None, a.start, 60)
        end = time.monotonic() + 30
        while True:
            try:
                assert t.shard(2) is t.clients[b.addr]
                break
            except StoreUnavailable:
                assert time.monotonic() < end, "not served again after the home came back"
                await asyncio.sleep(0.2)
    finally:
        await t.aclose()
