"""How many shard workers' fused calls a mailbox node has in flight at once
(docs/decisions/0165; turngate.py). Redis runs one call at a time, so on the Redis
MailboxStore at most MAILBOX_REDIS_TURNS calls are in flight: a direct record's call
then waits behind a few calls, not behind a round of every shard. Real Redis and the
real materializer loop over twelve shards, each holding a direct record (urgent turns:
only the node's total bounds them); the store holds every in-order fused call at a gate
the test opens, and counts how many wait there at once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from qim._core import ids
from qim._core.types import MessageCoord
from qim.consts import MAILBOX_GLOBAL_PERMIT, MAILBOX_REDIS_TURNS
from qim.faults import MAILBOX_POINTS, FaultPoints
from qim.services.mailbox.materializer import MailboxMaterializer
from qim.stores.redis.mailboxes import RedisMailboxStore
from qim.wire.dispatch import Dispatch
from tests.mailbox.test_lost_reply import NOW_MS, TENANT, DispatchLog, redis

__all__ = ["redis"]  # the fixture, shared with test_lost_reply.py

SHARDS = list(range(12))  # more shards with work than MAILBOX_REDIS_TURNS
SENDER = 6


class Counting(RedisMailboxStore):
    """The real store; in-order fused calls wait at `gate`, `most` is the peak waiting."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.gate = asyncio.Event()
        self.waiting = self.most = 0

    async def fused(self, *a: Any, **kw: Any) -> Any:
        self.waiting += 1
        self.most = max(self.most, self.waiting)
        try:
            await self.gate.wait()
        finally:
            self.waiting -= 1
        return await super().fused(*a, **kw)


def direct_record(shard: int) -> bytes:
    """A direct conversation's record for one recipient of `shard` (offset 0)."""
    receiver = 100 + shard
    coord = MessageCoord(b"M" + shard.to_bytes(15, "big"), ids.conversation_id_direct(TENANT, SENDER, receiver), 1,
                         SENDER, NOW_MS, 1, b"")
    return Dispatch(TENANT, b"d" + shard.to_bytes(15, "big"), coord, shard, b"c" * 16, (receiver,),
                    b"hi").encode()


async def peak_in_flight(redis: Any, turns: int, pushes: list) -> tuple[int, Counting, MailboxMaterializer,
                                                                          asyncio.Task]:
    """Start a materializer of SHARDS with `turns`, one direct record queued per shard;
    the peak of fused calls waiting at the gate once it has settled (0.3 s flat)."""
    log, store = DispatchLog(), Counting(redis)
    for shard in SHARDS:
        log.add(shard, 0, direct_record(shard))
    m = MailboxMaterializer("unused:1", store, SHARDS, lambda *a: pushes.append(a[1]), FaultPoints("", MAILBOX_POINTS),
                            consumer=log, overtake=True, turns=turns)  # type: ignore[arg-type]
    await m.start()
    task = asyncio.get_running_loop().create_task(m.run())
    deadline, last, since = time.monotonic() + 10, -1, time.monotonic()
    while time.monotonic() < deadline:
        if store.waiting != last:
            last, since = store.waiting, time.monotonic()
        elif last > 0 and time.monotonic() - since > 0.3:
            break
        await asyncio.sleep(0.02)
    return store.most, store, m, task


@pytest.mark.parametrize("turns", [MAILBOX_REDIS_TURNS, MAILBOX_GLOBAL_PERMIT])
async def test_the_nodes_turns_bound_the_fused_calls_in_flight_and_all_of_them_are_used(redis, turns):
    assert MAILBOX_REDIS_TURNS < len(SHARDS) < MAILBOX_GLOBAL_PERMIT
    pushes: list[int] = []
    most, store, m, task = await peak_in_flight(redis, turns, pushes)
    try:
        assert most == min(turns, len(SHARDS)), f"{most} fused calls in flight with {turns} turns"
        assert pushes == []  # nothing got past the gate
        store.gate.set()  # every shard's record is then materialized, turn after turn
        deadline = time.monotonic() + 10
        while len(pushes) < len(SHARDS):
            assert time.monotonic() < deadline, "the records were not materialized after the gate opened"
            assert not any(s.dirty for s in m.shards.values())
            await asyncio.sleep(0.02)
        assert store.most == min(turns, len(SHARDS))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
