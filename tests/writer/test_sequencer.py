"""Per-conversation turns (qim/services/writer/sequencer.py): FIFO per conversation,
independent conversations, released or cancelled tickets never block the line."""

from __future__ import annotations

import asyncio

from qim.services.writer.sequencer import NO_TURN, ConversationTurns


async def test_turns_follow_ticket_order_whatever_the_wakeup_order():
    turns = ConversationTurns()
    order = []

    async def request(i: int, delay: float):
        turn = turns.ticket(b"c")  # taken synchronously, in arrival order
        await asyncio.sleep(delay)  # later requests may reach the wait first
        await turn.wait()
        order.append(i)
        await asyncio.sleep(0)
        turn.release()

    await asyncio.gather(*(request(i, (20 - i) / 1000) for i in range(20)))
    assert order == list(range(20))
    assert turns.waiting(b"c") == 0


async def test_conversations_do_not_wait_for_each_other():
    turns = ConversationTurns()
    first = turns.ticket(b"a")
    other = turns.ticket(b"b")
    await asyncio.wait_for(other.wait(), 1)  # b is not behind a's head
    second = turns.ticket(b"a")
    waiter = asyncio.ensure_future(second.wait())
    await asyncio.sleep(0.01)
    assert not waiter.done()
    first.release()
    await asyncio.wait_for(waiter, 1)
    second.release(), other.release()
    assert turns.waiting(b"a") == turns.waiting(b"b") == 0


async def test_released_and_cancelled_tickets_leave_the_line():
    turns = ConversationTurns()
    head, failed, cancelled, last = (turns.ticket(b"c") for _ in range(4))
    failed.release()  # a request that failed validation before its turn
    task = asyncio.ensure_future(cancelled.wait())
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    head.release()
    head.release()  # idempotent
    await asyncio.wait_for(last.wait(), 1)
    last.release()
    assert turns.waiting(b"c") == 0
    await NO_TURN.wait()  # reads hold no turn
    NO_TURN.release()
