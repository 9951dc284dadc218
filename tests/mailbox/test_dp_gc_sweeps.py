"""The DispatchProgress GC sweeps a shard only when there can be something new to
delete (qim/services/mailbox/dpgc.py `gc_loop`): after the W of every lane moved
past the safety window, or after a sweep that stopped at its batch. An idle mailbox node
used to sweep every owned shard every second (one Redis read each, 64 a second)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from qim._core import watermark
from qim.faults import MAILBOX_POINTS, FaultPoints
from qim.services.mailbox import dpgc
from qim.services.mailbox.materializer import MailboxMaterializer
from qim.services.mailbox.shardstate import ShardState

SAFETY_MS = 10


class Store:
    """Records each sweep; deletes `full` keys while told to (a sweep cut at its batch)."""

    def __init__(self) -> None:
        self.sweeps: list[tuple[int, int]] = []
        self.full = 0

    async def gc_dispatch_progress(self, shard: int, upto: int, batch: int = 512) -> int:
        self.sweeps.append((shard, upto))
        if self.full:
            self.full -= 1
            return batch
        return 0


async def rounds(n: int) -> None:
    await asyncio.sleep(n * SAFETY_MS / 1000)


async def test_a_shard_is_swept_again_only_when_its_watermark_moved_or_a_sweep_was_cut():
    store = Store()
    m = MailboxMaterializer("", store, [], push=lambda *a: None, faults=FaultPoints("", MAILBOX_POINTS),
                            dp_gc_safety_ms=SAFETY_MS, consumer=SimpleNamespace())
    state = ShardState(3, 1, watermark.advance_all(watermark.empty(), 40))
    m.shards[3] = state
    task = asyncio.create_task(m._gc_loop())
    try:
        await rounds(30)
        assert store.sweeps == [(3, 40)]  # W stood still: one sweep, not one a round
        state.stored_blob = watermark.advance_all(state.blob, 90)
        await rounds(30)
        assert store.sweeps == [(3, 40), (3, 90)]
        store.full = 2  # the next sweeps stop at the batch: the shard is swept again at once
        state.stored_blob = watermark.advance_all(state.blob, 120)
        await rounds(30)
        assert store.sweeps == [(3, 40), (3, 90), (3, 120), (3, 120), (3, 120)]
    finally:
        task.cancel()


async def test_a_shard_whose_watermark_stands_still_is_swept_again_after_the_resweep_period(monkeypatch):
    monkeypatch.setattr(dpgc, "DP_GC_RESWEEP_S", 0.05)
    store = Store()
    m = MailboxMaterializer("", store, [], push=lambda *a: None, faults=FaultPoints("", MAILBOX_POINTS),
                            dp_gc_safety_ms=SAFETY_MS, consumer=SimpleNamespace())
    m.shards[1] = ShardState(1, 1, watermark.advance_all(watermark.empty(), 7))
    task = asyncio.create_task(m._gc_loop())
    try:
        await rounds(40)
        assert 2 <= len(store.sweeps) <= 10 and set(store.sweeps) == {(1, 7)}
    finally:
        task.cancel()
