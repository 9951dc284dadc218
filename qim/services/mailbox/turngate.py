"""Which shard worker's turn goes next in a mailbox node (issue 41: "direct traffic never
behind a group"; docs/decisions/0148-direct-turns-before-bulk-turns.md).

Every shard has one worker (materializer.py); a turn is one fused call (and the
overtake call before it, decision 0142). With every worker free to run at once, a
1,000-member group's burst keeps 64 turns of 512 entries each in flight: a shard that
just received a direct record sends its call behind all of them, in the event loop and
in Redis's queue, one round of every shard (1 to 3 s measured). A turn is *urgent* when
its shard holds a queued record of a direct conversation: it waits for the node's
permit only. Every other turn (*bulk*) also needs one of MAILBOX_BULK_TURNS permits,
few enough that an urgent call waits behind a handful of calls, not a round, and
enough that Redis always has the next bulk call queued (the group's drain).

Nothing is reordered within a shard: a worker's turns stay serial and in log order;
only which shard goes next changes, which docs/design.md §5.4 leaves free (shards are
independent partitions)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import AsyncIterator, Callable, Deque

Urgent = Callable[[], bool]  # whether the waiting shard holds a direct record now


class TurnGate:
    """Permits for shard workers' turns: at most `total` turns at once (the node's global
    permit), of which at most `bulk` are not urgent. A waiting turn's urgency is asked
    again whenever a permit frees (a direct record arriving while its shard waits
    promotes it); urgent waiters go first, bulk ones in arrival order. `on_turn(urgent)`
    is called as each turn starts (the turns counter). ValueError on a bad size."""

    def __init__(self, total: int, bulk: int, on_turn: Callable[[bool], None] = lambda urgent: None) -> None:
        if total < 1 or not 1 <= bulk <= total:
            raise ValueError(f"TurnGate: need 1 <= bulk ({bulk}) <= total ({total})")
        self._total, self._bulk = total, bulk
        self._running = self._running_bulk = 0
        self._waiters: Deque[tuple[Urgent, asyncio.Future]] = collections.deque()
        self._on_turn = on_turn

    @property
    def waiting(self) -> int:
        """Turns waiting for a permit."""
        return len(self._waiters)

    @contextlib.asynccontextmanager
    async def turn(self, urgent: Urgent) -> AsyncIterator[bool]:
        """Hold a permit for one turn; yields whether it was granted as urgent."""
        granted = await self._acquire(urgent)
        try:
            yield granted
        finally:
            self._release(granted)

    def _fits(self, urgent: bool) -> bool:
        return self._running < self._total and (urgent or self._running_bulk < self._bulk)

    def _take(self, urgent: bool) -> bool:
        self._running += 1
        self._running_bulk += not urgent
        self._on_turn(urgent)
        return urgent

    async def _acquire(self, urgent: Urgent) -> bool:
        now = urgent()
        if (now or not self._waiters) and self._fits(now):
            return self._take(now)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        entry = (urgent, fut)
        self._waiters.append(entry)
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # granted as we were cancelled: hand it on
                self._release(fut.result())
            else:
                self._waiters.remove(entry)
            raise

    def _release(self, urgent: bool) -> None:
        self._running -= 1
        self._running_bulk -= not urgent
        while self._waiters and self._running < self._total:
            pick = next((w for w in self._waiters if w[0]()), None)
            now = pick is not None
            if pick is None:
                if self._running_bulk >= self._bulk:
                    return
                pick = self._waiters[0]
            self._waiters.remove(pick)
            pick[1].set_result(self._take(now))
