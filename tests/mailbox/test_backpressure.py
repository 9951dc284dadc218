"""Shard FIFO back-pressure of the MailboxMaterializer (docs/design.md §5.4: FIFO 128 per
shard, strictly serial within a partition, a full FIFO pauses only its partition).

Pure scheduling logic: the consumer is a stand-in that hands out records, and the
per-record materialization is replaced by one that blocks on a chosen shard.
"""

from __future__ import annotations

import asyncio
import collections
import time
from types import SimpleNamespace

from qim._core import watermark
from qim.consts import MAILBOX_SHARD_FIFO
from qim.faults import FaultPoints
from qim.services.mailbox import materializer as mat_mod
from qim.services.mailbox.materializer import MailboxMaterializer
from qim.services.mailbox.metrics import MailboxMetrics
from qim.services.mailbox.shardstate import ShardState
from qim.services.mailbox.turngate import TurnGate


class FakeConsumer:
    def __init__(self, backlog: dict[int, int]) -> None:
        self.backlog = {p: list(range(n)) for p, n in backlog.items()}
        self.paused: set[int] = set()
        self.pause_calls: list[list[int]] = []

    async def consume(self, max_records: int, timeout: float) -> list:
        out = []
        for p, offsets in self.backlog.items():
            if p in self.paused:
                continue
            take, self.backlog[p] = offsets[:64], offsets[64:]
            out += [SimpleNamespace(partition=lambda p=p: p, offset=lambda o=o: o, value=lambda: b"") for o in take]
        await asyncio.sleep(0.001)
        return out[:max_records]

    async def pause(self, topic: str, parts: list[int]) -> None:
        self.pause_calls.append(list(parts))
        self.paused |= set(parts)

    async def resume(self, topic: str, parts: list[int]) -> None:
        self.paused -= set(parts)


async def test_a_stuck_shard_pauses_only_its_partition_and_others_flow(monkeypatch):
    release = asyncio.Event()
    done: dict[int, list[int]] = {0: [], 1: []}

    async def fake_materialize(store, cur, records, faults, through=None, memo=None):
        if cur.shard == 0:
            await release.wait()  # shard 0's store call hangs
        done[cur.shard].extend(offset for offset, _ in records)
        blob = watermark.advance_all(cur.blob, records[-1][0])
        event = SimpleNamespace(created_at_ms=int(time.time() * 1000), conversation_id=b"\x02" + b"g" * 15)
        return [SimpleNamespace(new_blob=blob, status="FRESH", tenant=0, mailbox_seq=0, recipients=(), event=event,
                                trace_id="", inline={})
                for _ in records]

    monkeypatch.setattr(mat_mod, "materialize", fake_materialize)
    m = MailboxMaterializer.__new__(MailboxMaterializer)
    m._consumer = FakeConsumer({0: 1000, 1: 1000})
    m._store, m._owned, m._push, m._faults, m._gc_safety_ms = None, [0, 1], lambda *a: None, FaultPoints(), 0
    m._gate = TurnGate(64, 4)
    m._ages = collections.defaultdict(lambda: MailboxMetrics().record_age.labels(kind="other"))
    m._overtake = False  # plain log order: this test counts the partition's flow
    m._m = MailboxMetrics()
    m.shards = {s: ShardState(s, 1, None) for s in (0, 1)}
    m.running = False
    runner = asyncio.get_running_loop().create_task(m.run())
    for _ in range(500):
        if len(done[1]) == 1000:
            break
        await asyncio.sleep(0.01)
    assert done[1] == list(range(1000))  # the other partition flowed, strictly in order
    assert 0 in m._consumer.paused and len(m.shards[0].queue) <= MAILBOX_SHARD_FIFO + 64  # bounded, paused
    assert done[0] == []
    release.set()
    for _ in range(500):
        if len(done[0]) == 1000:
            break
        await asyncio.sleep(0.01)
    assert done[0] == list(range(1000))  # resumed after draining, nothing lost or reordered
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)
