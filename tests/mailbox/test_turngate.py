"""TurnGate (qim/services/mailbox/turngate.py, decision 0148): a shard holding a direct
record takes its turn before the group's bulk turns, and bulk turns are bounded."""

from __future__ import annotations

import asyncio

import pytest

from qim.services.mailbox.turngate import TurnGate


async def _hold(gate: TurnGate, urgent, started: list, name: str, release: asyncio.Event) -> None:
    async with gate.turn(urgent):
        started.append(name)
        await release.wait()


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_bulk_turns_are_bounded_and_an_urgent_one_goes_past_them():
    gate, started, release = TurnGate(8, 2), [], asyncio.Event()
    tasks = [asyncio.create_task(_hold(gate, lambda: False, started, f"bulk{i}", release)) for i in range(5)]
    await _settle()
    assert started == ["bulk0", "bulk1"] and gate.waiting == 3  # two bulk turns at once, the rest wait
    tasks.append(asyncio.create_task(_hold(gate, lambda: True, started, "direct", release)))
    await _settle()
    assert started[-1] == "direct" and gate.waiting == 3  # not behind the waiting bulk turns
    release.set()
    await asyncio.gather(*tasks)
    assert sorted(started) == sorted(["direct"] + [f"bulk{i}" for i in range(5)]) and gate.waiting == 0


async def test_a_waiting_turn_whose_shard_got_a_direct_record_goes_first():
    gate, started = TurnGate(1, 1), []
    first, rest = asyncio.Event(), asyncio.Event()
    directs: list[int] = []
    rest.set()
    holder = asyncio.create_task(_hold(gate, lambda: False, started, "running", first))
    await _settle()
    a = asyncio.create_task(_hold(gate, lambda: False, started, "bulk", rest))
    await _settle()
    b = asyncio.create_task(_hold(gate, lambda: bool(directs), started, "promoted", rest))
    await _settle()
    directs.append(7)  # a direct record reached shard b while it waited behind a
    first.set()
    await asyncio.gather(holder, a, b)
    assert started == ["running", "promoted", "bulk"]


async def test_the_global_permit_bounds_urgent_turns_too():
    gate, started, release = TurnGate(2, 1), [], asyncio.Event()
    tasks = [asyncio.create_task(_hold(gate, lambda: True, started, f"d{i}", release)) for i in range(3)]
    await _settle()
    assert started == ["d0", "d1"] and gate.waiting == 1
    release.set()
    await asyncio.gather(*tasks)
    assert started == ["d0", "d1", "d2"]


async def test_a_cancelled_waiter_gives_back_nothing_it_did_not_hold():
    gate, started, release = TurnGate(1, 1), [], asyncio.Event()
    holder = asyncio.create_task(_hold(gate, lambda: False, started, "running", release))
    await _settle()
    waiter = asyncio.create_task(_hold(gate, lambda: False, started, "cancelled", release))
    await _settle()
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    assert gate.waiting == 0
    release.set()
    await holder
    after, done = [], asyncio.Event()
    done.set()
    await asyncio.wait_for(_hold(gate, lambda: False, after, "next", done), 1.0)  # the permit came back
    assert started == ["running"] and after == ["next"]


def test_sizes_are_checked():
    with pytest.raises(ValueError):
        TurnGate(4, 5)
    with pytest.raises(ValueError):
        TurnGate(4, 0)
