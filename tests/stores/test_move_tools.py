"""What a newcomer operator found wrong with the Redis move tools (amendments of
docs/decisions/0104 and 0113), on three real Redis instances:

- a pinned shard or bucket moved away and back to its default instance keeps its
  explicit map entry, so a longer address list rolled out next places it where its keys
  are (the entry used to be dropped);
- a second run of a move while one runs is refused at once naming the first (it used
  to "continue", wait 60 s silently and claim the shard stayed marked); a dead
  runner's lock expires and the move is continued; one bucket move at a time;
- the wait for a lease says who holds it, and its final message says what the map
  says then;
- `qimctl redis where` prints a user's shard and a conversation's bucket with their
  instances from the live map; the pin commands' wording.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from qim._core import ids
from qim.cli import qimctl
from qim.config.redislayout import RedisLayout
from qim.infra.redis.client import connect
from qim.stores.redis.bucketmove import move_bucket, pin_buckets
from qim.stores.redis.movelock import bucket_lock_key, shard_lock_key
from qim.stores.redis.placement import PLACEMENT_KEY
from qim.stores.redis.registry import RedisShardRegistry
from qim.stores.redis.shardmove import MoveRefused, move_shard, pin_shards
from qim.stores.redis.topology import topology_of
from tests.stores.conftest import shard_users
from tests.stores.test_topology_archive import layout3

TENANT = 7


async def until(check, what: str, within: float = 30.0) -> None:
    end = time.monotonic() + within
    while not check():
        assert time.monotonic() < end, what
        await asyncio.sleep(0.05)


async def test_a_pin_survives_a_move_away_and_back_and_the_longer_list_finds_it(redis_three):
    a, b, c = redis_three
    two = RedisLayout(core=(a.addr, b.addr), mailbox=(a.addr, b.addr), shard_count=8)
    three = RedisLayout(core=(a.addr, b.addr, c.addr), mailbox=(a.addr, b.addr, c.addr), shard_count=8)
    assert await pin_shards(two, connect) == 8 and await pin_buckets(two, connect) == 256
    # shard 2: `2 mod 2` is a, `2 mod 3` is c; bucket 100: a of two core instances, b of three
    await move_shard(two, connect, a.addr, 2, b.addr, print, settle_s=0)
    await move_shard(two, connect, a.addr, 2, a.addr, print, settle_s=0)
    await move_bucket(two, connect, 100, b.addr, print, settle_s=0)
    await move_bucket(two, connect, 100, a.addr, print, settle_s=0)
    placement = a.client().hgetall(PLACEMENT_KEY)
    assert placement.get(b"shard:2") == a.addr.encode() and placement.get(b"bucket:100") == a.addr.encode()
    t3 = topology_of(three)  # the longer lists rolled out: every shard and bucket where it was
    try:
        await t3.load_placement()
        assert [t3.addr_of(t3.shard(s)) for s in range(8)] == [two.mailbox[s % 2] for s in range(8)]
        assert [t3.addr_of(t3.core(bk)) for bk in range(256)] == [two.core[two.core_index(bk)] for bk in range(256)]
    finally:
        await t3.aclose()


async def test_a_second_run_of_a_move_is_refused_at_once_and_a_dead_runners_lock_expires(redis_three):
    a, b, c = redis_three
    layout = layout3(redis_three)  # shard 1 on a
    first = asyncio.ensure_future(move_shard(layout, connect, a.addr, 1, b.addr, print, settle_s=3))
    try:
        await until(lambda: a.client().hget(PLACEMENT_KEY, "moving:1") is not None, "the first run did not mark")
        with pytest.raises(MoveRefused, match=r"another move-shard of this shard is running \(.*shard 1 -> "):
            await move_shard(layout, connect, a.addr, 1, b.addr, print, settle_s=0, hold_wait_s=3)
        assert not first.done(), "the second run was not refused while the first ran"
        assert (await first)["source"] == a.addr
    finally:
        first.cancel()
    placement = a.client().hgetall(PLACEMENT_KEY)
    assert placement[b"shard:1"] == b.addr.encode() and b"moving:1" not in placement
    assert not a.client().exists(shard_lock_key(1))

    # a run that died after its mark: its lock refuses a new run (naming it) until it expires
    a.client().hset(PLACEMENT_KEY, mapping={"moving:1": c.addr, "v": 9})
    a.client().set(shard_lock_key(1), "deadhost pid 4242 (x): shard 1 -> C", px=1500)
    with pytest.raises(MoveRefused, match="deadhost pid 4242"):
        await move_shard(layout, connect, a.addr, 1, c.addr, print, settle_s=0)
    await until(lambda: not a.client().exists(shard_lock_key(1)), "the dead runner's lock did not expire")
    lines: list[str] = []
    await move_shard(layout, connect, a.addr, 1, c.addr, lines.append, settle_s=0)
    assert "continuing the move" in lines[0] and a.client().hget(PLACEMENT_KEY, "shard:1") == c.addr.encode()


async def test_one_bucket_move_at_a_time_with_progress_while_it_settles(redis_three):
    a, b, c = redis_three
    layout = layout3(redis_three)  # bucket 5 on a
    lines: list[str] = []
    first = asyncio.ensure_future(move_bucket(layout, connect, 5, b.addr, lines.append, settle_s=8))
    try:
        await until(lambda: a.client().hget(PLACEMENT_KEY, "moving:b5") is not None, "the first run did not mark")
        for bucket in (5, 6):
            with pytest.raises(MoveRefused, match=r"another move-bucket is running \(.*bucket 5 -> "):
                await move_bucket(layout, connect, bucket, b.addr, print, settle_s=0)
        assert not first.done(), "the second run was not refused while the first ran"
        await first
    finally:
        first.cancel()
    assert any("bucket 5: settling:" in line and "s left" in line for line in lines), lines
    placement = a.client().hgetall(PLACEMENT_KEY)
    assert placement[b"bucket:5"] == b.addr.encode() and b"moving:b5" not in placement
    assert not a.client().exists(bucket_lock_key())


async def test_the_wait_for_a_lease_names_its_holder_and_ends_with_the_truth(redis_three):
    a, b, c = redis_three
    layout = layout3(redis_three)
    reg = RedisShardRegistry(topology_of(layout).home)
    await reg.join("mailbox", "m1", "inc1", 60_000, "", "")
    assert await reg.acquire("mailbox", "m1", "inc1", 60_000, [1]) == {1: 1}  # a node that ignores the mark
    lines: list[str] = []
    with pytest.raises(MoveRefused, match=f"the shard stays marked moving to {b.addr}: run the move again"):
        await move_shard(layout, connect, a.addr, 1, b.addr, lines.append, settle_s=0, hold_wait_s=8)
    assert any("waiting for the mailbox lease (held by node m1)" in line for line in lines), lines

    async def finished_elsewhere() -> None:  # what another runner (or a hand edit) did meanwhile
        await asyncio.sleep(1)
        a.client().hset(PLACEMENT_KEY, "shard:1", b.addr)
        a.client().hdel(PLACEMENT_KEY, "moving:1")
    other = asyncio.ensure_future(finished_elsewhere())
    with pytest.raises(MoveRefused, match=f"not marked moving to {b.addr} any more \\(placed on {b.addr}\\)"):
        await move_shard(layout, connect, a.addr, 1, b.addr, print, settle_s=0, hold_wait_s=3)
    await other


def qimctl_out(capsys, *argv: str) -> tuple[int, str]:
    rc = qimctl.main(list(argv))
    got = capsys.readouterr()
    return rc, got.out + got.err


async def test_where_a_user_and_a_conversation_live_and_the_pin_wording(redis_three, monkeypatch, capsys):
    a, b, c = redis_three
    layout = layout3(redis_three)
    for var, value in (("QIM_REDIS_ADDR", a.addr), ("QIM_REDIS_CORE_ADDRS", ",".join(layout.core)),
                       ("QIM_REDIS_MAILBOX_ADDRS", ",".join(layout.mailbox)), ("QIM_MAILBOX_SHARD_COUNT", "8")):
        monkeypatch.setenv(var, value)
    run = asyncio.get_running_loop().run_in_executor
    user = shard_users(TENANT, 1, 1)[0]
    conv = ids.conversation_id_group(TENANT, 1)
    bucket = ids.commit_bucket(TENANT, conv)
    argv = ("redis", "where", "--tenant", str(TENANT), "--user", str(user), "--conversation", conv.hex())
    rc, out = await run(None, qimctl_out, capsys, *argv)
    assert rc == 0 and f"user {user}: MailboxShard 1 of 8, on {a.addr} (no map entry: S mod n" in out, out
    core = layout.core[layout.core_index(bucket)]
    assert f"commit bucket {bucket}, on {core} (no map entry: B*n//256" in out, out

    await move_shard(layout, connect, a.addr, 1, b.addr, print, settle_s=0)
    a.client().hset(PLACEMENT_KEY, f"moving:b{bucket}", c.addr)
    rc, out = await run(None, qimctl_out, capsys, *argv)
    assert rc == 0 and f"MailboxShard 1 of 8, on {b.addr} (placement map entry shard:1)" in out, out
    assert f"on {core} (no map entry: B*n//256 of QIM_REDIS_CORE_ADDRS); being moved to {c.addr}" in out, out
    rc, out = await run(None, qimctl_out, capsys, "redis", "where", "--tenant", str(TENANT))
    assert rc == 2 and "give --user" in out, out
    rc, out = await run(None, qimctl_out, capsys, "redis", "where", "--conversation", "zz")
    assert rc == 2 and "--conversation must be 32 hex digits" in out, out
    a.client().hdel(PLACEMENT_KEY, f"moving:b{bucket}")

    assert await run(None, qimctl_out, capsys, "redis", "pin-shards") == (0, "pin-shards: 7 of 8 shards pinned "
                                                                          "now; the other 1 were pinned already\n")
    assert await run(None, qimctl_out, capsys, "redis", "pin-shards") == (
        0, "pin-shards: all 8 shards were pinned already; nothing written\n")
    assert await run(None, qimctl_out, capsys, "redis", "pin-buckets") == (0, "pin-buckets: all 256 commit buckets "
                                                                           "pinned now\n")
