"""ShardKeeper on a real Redis registry (qim/cluster/keeper.py;
docs/decisions/0040-scale-leases-and-fencing.md): a second live process with the same
node id refuses to start naming the id; a silent predecessor is taken over with its
shards; shards spread by rendezvous over the live nodes and move by release, never with
two owners; a dead node's shards are taken within the lease + one renewal; a registry
that cannot be reached leaves the node serving until its leases end, then serving
nothing (fail closed) until it answers again."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest

from qim.cluster.keeper import ShardKeeper
from qim.cluster.placement import shards_of
from qim.infra.redis.client import connect
from qim.stores.redis.registry import RedisShardRegistry
from qim.stores.registry import JoinRefused

TTL_MS, RENEW_MS, COUNT = 1200, 300, 8


class Node:
    """A keeper with recording callbacks; `serving` is what the 'service' serves."""

    def __init__(self, registry, node_id: str) -> None:
        self.serving: dict[int, int] = {}
        self.events: list[tuple[str, int, object]] = []
        self.keeper = ShardKeeper(registry, "mailbox", node_id, COUNT, TTL_MS, RENEW_MS, addr=f"{node_id}:1",
                                  on_acquire=self.acquire, on_release=self.release)
        self.task = None

    async def acquire(self, shard: int, epoch: int) -> None:
        self.serving[shard] = epoch
        self.events.append(("acquire", shard, epoch))

    async def release(self, shard: int, reason: str) -> None:
        self.serving.pop(shard, None)
        self.events.append(("release", shard, reason))

    async def start(self) -> "Node":
        await self.keeper.join()
        self.task = asyncio.get_running_loop().create_task(self.keeper.run())
        return self

    async def crash(self) -> None:
        """Stop renewing without releasing anything (SIGKILL as the registry sees it)."""
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


async def until(cond, timeout: float) -> float:
    started = time.monotonic()
    while not cond():
        assert time.monotonic() - started < timeout, "condition not reached"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


@pytest.fixture
async def registry(private_redis):
    client = connect(private_redis.addr)
    yield RedisShardRegistry(client)
    await client.aclose()


async def test_a_second_live_process_with_the_same_node_id_refuses_to_start(registry):
    first = await Node(registry, "mailbox@dup").start()
    with pytest.raises(JoinRefused, match="'mailbox@dup' is in use by a live process"):
        await Node(registry, "mailbox@dup").keeper.join()
    await until(lambda: len(first.serving) == COUNT, 5)
    assert not list(first.keeper.not_ready())  # the first one is unaffected
    await first.crash()


async def test_a_restart_under_the_same_id_takes_the_silent_predecessors_shards_at_once(registry):
    old = await Node(registry, "mailbox@a").start()
    await until(lambda: len(old.serving) == COUNT, 5)
    await old.crash()
    new = Node(registry, "mailbox@a")
    waited = time.monotonic()
    await new.start()
    waited = time.monotonic() - waited
    assert waited < TTL_MS / 1000  # presumed dead after a few silent renewals, not a whole lease
    await until(lambda: len(new.serving) == COUNT, 2)
    assert set(new.serving.values()) == {2}  # a new incarnation is a new owner
    await new.crash()


async def test_shards_spread_over_live_nodes_move_by_release_and_are_taken_over_after_a_crash(registry):
    a = await Node(registry, "mailbox@a").start()
    await until(lambda: len(a.serving) == COUNT, 5)
    b = await Node(registry, "mailbox@b").start()
    want_b = shards_of("mailbox", COUNT, ["mailbox@a", "mailbox@b"], "mailbox@b")
    assert 0 < len(want_b) < COUNT

    async def never_two_owners():
        while True:
            assert not set(a.serving) & set(b.serving), "a shard served by two nodes at once"
            await asyncio.sleep(0.005)
    watch = asyncio.get_running_loop().create_task(never_two_owners())
    await until(lambda: set(b.serving) == want_b and len(a.serving) + len(b.serving) == COUNT, 5)
    assert all(e[2] == "rebalanced to another node" for e in a.events if e[0] == "release")
    assert set(b.serving.values()) == {2}  # epoch 1 was a's
    await a.crash()
    took = await until(lambda: len(b.serving) == COUNT, 5)
    assert took <= (TTL_MS + 2 * RENEW_MS) / 1000  # within the lease + one renewal (+ scheduling)
    watch.cancel()
    await asyncio.gather(watch, return_exceptions=True)
    await b.crash()


async def test_an_unreachable_registry_fails_closed_at_the_end_of_the_lease(private_redis):
    client = connect(private_redis.addr)
    node = await Node(RedisShardRegistry(client), "mailbox@solo").start()
    await until(lambda: len(node.serving) == COUNT, 5)
    private_redis_pid = private_redis.pid
    import os
    os.kill(private_redis_pid, signal.SIGSTOP)  # the registry stops answering (connections hang)
    try:
        stopped = time.monotonic()
        assert node.keeper.holds(0)  # still within the lease: keeps serving
        gone = await until(lambda: not node.serving, 5)
        assert gone <= TTL_MS / 1000 + 0.1  # never past its lease
        assert not node.keeper.holds(0)
        reasons = list(node.keeper.not_ready())
        assert reasons and "shard registry unreachable" in reasons[0] and "serving no shards" in reasons[0]
        assert time.monotonic() - stopped >= (TTL_MS - RENEW_MS) / 1000 - 0.35  # not before it ended either
    finally:
        os.kill(private_redis_pid, signal.SIGCONT)
    await until(lambda: len(node.serving) == COUNT, 10)  # the registry answers: taken again
    assert not list(node.keeper.not_ready())
    await node.crash()
    await client.aclose()


async def test_a_refused_shard_is_released_in_full_before_it_is_taken_again_and_a_failed_start_is_undone(registry):
    """The mailbox stops a fenced shard's materializer itself; everything else of it (its
    presence partition) must stop too before the keeper may take the shard again — a
    partition left assigned made every later start of it fail (found by tests/scale).
    A start that fails half way is undone (on_release) before the lease is released."""
    from qim.errors import EngineError

    node = await Node(registry, "mailbox@f").start()
    await until(lambda: len(node.serving) == COUNT, 5)
    failing = {3}

    async def acquire(shard: int, epoch: int) -> None:
        node.serving[shard] = epoch  # started half way, then the broker failed
        node.events.append(("acquire", shard, epoch))
        if shard in failing:
            failing.discard(shard)
            raise EngineError("assign failed")

    node.keeper._on_acquire = acquire
    node.events.clear()
    node.keeper.refused(3)  # a write of shard 3 was refused by its fence
    await until(lambda: 3 in node.keeper.owned and not failing, 10)
    mine = [e for e in node.events if e[1] == 3]
    # released in full; taken again (the registry still names this node here), which
    # failed and was undone; released in the registry and taken under a new epoch
    assert [e[0] for e in mine] == ["release", "acquire", "release", "acquire"], mine
    assert mine[0][2] == "fenced by a newer owner" and mine[2][2] == "could not start"
    assert mine[3][2] > mine[1][2] and node.serving[3] == mine[3][2]
    await node.crash()


async def test_slow_starts_and_stops_never_let_the_leases_of_served_shards_lapse(registry):
    """A takeover starts each shard with broker and store calls (seconds under load) and a
    rebalance stops each one the same way; the keeper renews all the while, so the shards
    it already serves never stop and those it starts are its own when the starts end. A
    keeper that renewed only between ticks let every lease of the node lapse after a 2 s
    takeover, dropping its own shards too (seen in tests/e2e/test_shard_takeover.py)."""
    from qim.cluster.keeper import REBALANCED

    a = await Node(registry, "mailbox@a").start()
    b = await Node(registry, "mailbox@b").start()
    await until(lambda: a.serving and b.serving and len(a.serving) + len(b.serving) == COUNT, 5)
    plain_acquire, plain_release = a.acquire, a.release

    async def slow_acquire(shard: int, epoch: int) -> None:
        await asyncio.sleep(2 * TTL_MS / 1000)  # every start outlives the lease
        await plain_acquire(shard, epoch)

    async def slow_release(shard: int, reason: str) -> None:
        if reason == REBALANCED:
            await asyncio.sleep(0.8 * TTL_MS / 1000)  # the stops together outlive it
        await plain_release(shard, reason)

    a.keeper._on_acquire, a.keeper._on_release = slow_acquire, slow_release
    a.events.clear()
    await b.crash()
    await until(lambda: len(a.serving) == COUNT, 10)
    assert [e for e in a.events if e[0] == "release"] == [], a.events  # nothing it served stopped
    table = await registry.owners("mailbox", COUNT)
    assert {(o.node_id, o.live) for o in table} == {("mailbox@a", True)}
    assert all(a.keeper.holds(s) for s in range(COUNT))

    c = await Node(registry, "mailbox@c").start()  # a hands c its share, one slow stop at a time
    want_c = shards_of("mailbox", COUNT, ["mailbox@a", "mailbox@c"], "mailbox@c")
    assert len(want_c) >= 2
    await until(lambda: set(c.serving) == want_c, 20)
    released = [e for e in a.events if e[0] == "release"]
    assert {e[1] for e in released} == want_c and {e[2] for e in released} == {REBALANCED}, released
    assert set(a.serving) == set(range(COUNT)) - want_c and all(a.keeper.holds(s) for s in a.serving)
    for node in (a, c):
        await node.crash()
