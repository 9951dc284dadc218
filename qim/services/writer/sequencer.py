"""Per-conversation FIFO turns of the writer (docs/design.md §3: "one device's sends to one
conversation get conversation_seq in submission order"; docs/decisions/0017).

A request that reserves a conversation_seq takes a ticket for its conversation when its
RPC frame is read: `ticket()` is synchronous and is called before the request's first
await, and the RPC server starts one task per frame in arrival order, so tickets are in
arrival order. The holder of the head ticket reserves (one Lua call), enqueues its
Outbox record with the producer and only then releases the turn, so reserve order and
produce() order per conversation both equal arrival order while Outbox deliveries
still overlap (pipelining). A released or abandoned ticket never blocks the line.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Optional


class Turn:
    """One place in a conversation's line. `await wait()` returns once every earlier
    ticket of the conversation was released; `release()` is idempotent and may be called
    at any time (also before the turn came: the ticket then leaves the line)."""

    __slots__ = ("_line", "_key", "_future", "released")

    def __init__(self, line: Optional["ConversationTurns"], key: bytes) -> None:
        self._line = line
        self._key = key
        self._future: Optional[asyncio.Future] = None
        self.released = line is None

    async def wait(self) -> None:
        """Wait for this ticket's turn (returns at once when it is already at the head)."""
        if self.released or self._line is None:
            return
        queue = self._line._queues[self._key]
        if queue[0] is self:
            return
        self._future = asyncio.get_running_loop().create_future()
        try:
            await self._future
        except asyncio.CancelledError:
            self.release()
            raise

    def __enter__(self) -> "Turn":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()  # the turn is released when the request ends at the latest

    def release(self) -> None:
        """Leave the line; wakes the next ticket when this one was at the head."""
        if self.released:
            return
        self.released = True
        if self._line is not None:
            self._line._leave(self)


NO_TURN = Turn(None, b"")  # requests that reserve nothing (reads) or failed before a key


class ConversationTurns:
    """The lines of every conversation with a ticket outstanding (dict of deques; an
    empty line is removed, so memory is bounded by the requests in progress)."""

    def __init__(self) -> None:
        self._queues: dict[bytes, deque[Turn]] = {}

    def ticket(self, key: bytes) -> Turn:
        """A new ticket at the end of `key`'s line (key: tenant ‖ conversation_id)."""
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = deque()
        turn = Turn(self, key)
        queue.append(turn)
        return turn

    def waiting(self, key: bytes) -> int:
        """Tickets in `key`'s line (for tests and metrics)."""
        return len(self._queues.get(key, ()))

    def _leave(self, turn: Turn) -> None:
        queue = self._queues[turn._key]
        if queue[0] is turn:
            queue.popleft()
            if queue:
                nxt = queue[0]
                if nxt._future is not None and not nxt._future.done():
                    nxt._future.set_result(None)
        else:
            queue.remove(turn)  # rare: a request that failed before its turn came
        if not queue:
            del self._queues[turn._key]
