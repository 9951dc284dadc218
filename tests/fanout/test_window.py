"""The fanout's delivery window (qim/services/fanout/window.py, docs/decisions/0162):
batches settle in the order they were produced whatever order their deliveries end in,
nothing settles after a failure, and a full line stops the producer side."""

from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator

import pytest

from qim.errors import EngineError
from qim.services.fanout.window import DeliveryWindow, Pending


def _batch(name: str) -> tuple[Pending, asyncio.Future]:
    fut = asyncio.get_running_loop().create_future()
    return Pending([name], [fut]), fut


async def _turns(n: int = 20) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


@contextlib.asynccontextmanager
async def running(limit: int, order: list) -> AsyncIterator[DeliveryWindow]:
    """A started window whose settle appends each batch's name to `order`."""
    window = DeliveryWindow(limit, lambda p: _settled_into(order, p))
    window.start()
    try:
        yield window
    finally:
        await window.stop()


async def _settled_into(order: list, pending: Pending) -> None:
    results = await asyncio.gather(*pending.futures, return_exceptions=True)
    failed = [r for r in results if isinstance(r, BaseException)]
    if failed:
        raise failed[0]
    order.append(pending.records[0])


async def test_batches_settle_in_put_order_when_a_later_delivery_ends_first():
    order: list[str] = []
    async with running(4, order) as window:
        first, f1 = _batch("first")
        second, f2 = _batch("second")
        await window.put(first)
        await window.put(second)
        f2.set_result((0, 1))
        await _turns()
        assert order == [] and window.in_flight == 2  # the second waits for the first
        f1.set_result((0, 0))
        await asyncio.wait_for(window.drain(), 5)
        assert order == ["first", "second"] and window.in_flight == 0 and window.failure is None


async def test_nothing_settles_after_a_failed_batch_until_the_failure_is_taken():
    order: list[str] = []
    async with running(4, order) as window:
        bad, f1 = _batch("bad")
        later, f2 = _batch("later")
        await window.put(bad)
        await window.put(later)
        f2.set_result((0, 1))
        f1.set_exception(EngineError("broker gone"))
        await asyncio.wait_for(window.drain(), 5)
        assert order == []  # the later batch was delivered, yet advanced nothing
        failure = window.take_failure()
        assert isinstance(failure, EngineError) and window.failure is None
        again, f3 = _batch("again")  # the replay's batch settles normally
        await window.put(again)
        f3.set_result((0, 0))
        await asyncio.wait_for(window.drain(), 5)
        assert order == ["again"]


async def test_a_put_waits_while_the_records_in_flight_would_pass_the_limit():
    order: list[str] = []
    async with running(2, order) as window:  # two dispatch records
        batches = [_batch(f"b{i}") for i in range(3)]  # one record each
        await window.put(batches[0][0])
        await window.put(batches[1][0])
        third = asyncio.get_running_loop().create_task(window.put(batches[2][0]))
        await _turns()
        assert not third.done() and window.in_flight == 2 and window.records == 2
        batches[0][1].set_result((0, 0))
        await asyncio.wait_for(third, 5)
        for _, fut in batches[1:]:
            fut.set_result((0, 1))
        await asyncio.wait_for(window.drain(), 5)
        assert order == ["b0", "b1", "b2"] and window.records == 0


async def test_a_batch_above_the_limit_goes_alone():
    order: list[str] = []
    async with running(2, order) as window:
        futs = [asyncio.get_running_loop().create_future() for _ in range(5)]
        await asyncio.wait_for(window.put(Pending(["big"], futs)), 5)  # nothing in flight: it fits
        small, f = _batch("small")
        waiting = asyncio.get_running_loop().create_task(window.put(small))
        await _turns()
        assert not waiting.done() and window.records == 5
        for fut in futs:
            fut.set_result((0, 0))
        await asyncio.wait_for(waiting, 5)
        f.set_result((0, 1))
        await asyncio.wait_for(window.drain(), 5)
        assert order == ["big", "small"]


def test_a_window_needs_room_for_one_batch():
    with pytest.raises(ValueError, match="at least 1"):  # a limit of dispatch records
        DeliveryWindow(0, lambda p: asyncio.sleep(0))
