"""The fanout's delivery window (docs/decisions/0162-the-fanout-pipelines-its-batches.md).

Before it, the coordinator produced a batch's dispatches and awaited every delivery
before it read the next batch. During a 1,000-member group's burst a batch held about
800 dispatch records for 64 partitions, each partition fsynced by the broker, and took
about 200 ms to deliver: a direct message committed meanwhile waited that long in the
Outbox before the fanout even read it (commit to fanout P50 114 ms, P99 270 ms, one
run's trace), and then its own batch's delivery.

Now a batch is produced as soon as it is read, while earlier batches still await their
deliveries, up to a bound on the dispatch records in flight (FANOUT_WINDOW_DISPATCHES;
a bound in batches filled at once: read as fast as it comes, a batch holds a few
records, and five or thirty-two of them were always in flight). Batches are *settled* (their deliveries awaited, then the
Outbox positions advanced, decision 0026's rule: never past an undelivered dispatch)
one at a time, in the order they were produced, by one task. After a failed settle no
later batch advances a position: the coordinator drains the window and re-reads from the
positions, which still name the failed batch's first records (the replay converges
through dispatch_id, like a crash's). Order within a conversation is what one producer
keeps per partition (the idempotent producer's queue, in produce order), as it was
between the records of one batch.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Optional


@dataclass
class Pending:
    """One produced batch awaiting its deliveries: the Outbox records it covers, one
    future per dispatch record (AsyncProducer.produce), when the batch was read
    (time.perf_counter(), seconds) and when its last dispatch was produced; `tenures`:
    Outbox partition -> the coordinator's tenure of it when the batch was produced
    (decision 0163)."""

    records: list
    futures: list = field(default_factory=list)
    started: float = 0.0
    produced: float = 0.0
    tenures: dict = field(default_factory=dict)


Settle = Callable[[Pending], Awaitable[None]]


class DeliveryWindow:
    """Produced batches wait in line to be settled, one at a time in the order put, while
    their dispatch records in flight stay within `limit` (a batch above it goes alone):
    `put` waits for room (the fanout's back-pressure: it reads no further).
    `settle(pending)` awaits a batch's deliveries and advances the positions; the first
    exception it raises is kept in `failure`, and every batch after it is only awaited
    (its futures, errors ignored), never settled. `drain()` returns once every batch put
    has been settled or skipped. ValueError on a limit below 1."""

    def __init__(self, limit: int, settle: Settle) -> None:
        if limit < 1:
            raise ValueError(f"DeliveryWindow: limit must be at least 1, not {limit}")
        self._limit = limit
        self._line: asyncio.Queue[Pending] = asyncio.Queue()
        self._room = asyncio.Condition()
        self._settle = settle
        self._task: Optional[asyncio.Task] = None
        self.failure: Optional[BaseException] = None
        self.in_flight = 0  # batches put and not yet settled or skipped
        self.records = 0  # their dispatch records

    def start(self) -> None:
        """Start the settling task (on the running loop)."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="fanout:settle")

    async def put(self, pending: Pending) -> None:
        """Add a produced batch to the line once its records fit in the limit (at once
        when nothing is in flight)."""
        n = len(pending.futures)
        async with self._room:
            await self._room.wait_for(lambda: self.records == 0 or self.records + n <= self._limit)
            self.records += n
            self.in_flight += 1
        self._line.put_nowait(pending)

    async def drain(self) -> None:
        """Wait until every batch put has been settled or skipped."""
        await self._line.join()

    def take_failure(self) -> Optional[BaseException]:
        """The kept failure, cleared (settling resumes with the next batch put)."""
        failure, self.failure = self.failure, None
        return failure

    async def stop(self) -> None:
        """Cancel the settling task; batches still in line are dropped (their positions
        never advanced, so the next owner or start re-reads them)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            pending = await self._line.get()
            try:
                if self.failure is None:
                    await self._settle(pending)
                else:  # after a failure nothing advances: let the deliveries end, unread
                    await asyncio.gather(*pending.futures, return_exceptions=True)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # kept for the coordinator: it drains and re-reads
                self.failure = exc
                await asyncio.gather(*pending.futures, return_exceptions=True)
            finally:
                async with self._room:
                    self.records -= len(pending.futures)
                    self.in_flight -= 1
                    self._room.notify_all()
                self._line.task_done()
