"""A watermark mark published while its partition is removed (the lease lapsed during
the awaited advance): the archiver goes on, neither crashing its task nor keeping the
mark (qim/services/archiver/archiver.py _publish_marks). No engine is reached: the
state store and the consumer are stand-ins that only record calls."""

from __future__ import annotations

import asyncio

from qim.services.archiver.archiver import HistoryArchiver


class HeldState:
    """advance_watermark waits until released, as a slow Redis call would."""

    def __init__(self) -> None:
        self.entered, self.release, self.calls = asyncio.Event(), asyncio.Event(), []

    async def advance_watermark(self, t0: int, partition: int, count: int) -> int:
        self.calls.append((t0, partition, count))
        self.entered.set()
        await self.release.wait()
        return t0


class Unassigned:
    """The consumer's remove_partitions, recorded."""

    def __init__(self) -> None:
        self.removed: list[int] = []

    async def remove_partitions(self, topic: str, partitions: list[int]) -> None:
        self.removed.extend(partitions)


async def test_a_partition_removed_while_its_mark_is_published():
    state, consumer = HeldState(), Unassigned()
    archiver = HistoryArchiver("127.0.0.1:9", state, None, 10, 1)  # type: ignore[arg-type]
    await archiver._consumer.close()  # the real one never reached a broker
    archiver._consumer = consumer  # type: ignore[assignment]
    archiver.next, archiver.fences, archiver.partition_count = {1: 30}, {1: 2}, 2
    archiver._marks = {1: (1000, 26)}  # everything below offset 26 archived (next is 30)
    publishing = asyncio.create_task(archiver._publish_marks())
    await asyncio.wait_for(state.entered.wait(), 5)
    await archiver.remove_partition(1, "leases ended without a renewal")
    state.release.set()
    await asyncio.wait_for(publishing, 5)  # a KeyError here killed the archiver's task
    assert state.calls == [(1000, 1, 2)]
    assert archiver._marks == {} and archiver.next == {} and consumer.removed == [1]
