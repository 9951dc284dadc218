"""Bounded exponential backoff for transient server errors.

UNAVAILABLE, RATE_LIMITED and MAILBOX_DIRTY mean "not now" (docs/protocol.md: retry
with the same client_message_id); every other ErrorCode is permanent and surfaces at
once. `Backoff` doubles from `start` to `cap` seconds and gives up once `budget`
seconds have passed since the first failure, so a caller never waits for ever. An
ERROR with `retry_after_ms` (RATE_LIMITED) is never retried sooner than that.
The requests the gateway's send-rate buckets charge go through the runtime's RateGate
instead (qim/sdk/rategate.py: one gate for all of them, no retry storm).
"""

from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable, Optional, TypeVar

from qim.errors import ErrorCode
from qim.sdk.events import ServerError

T = TypeVar("T")
RETRYABLE = frozenset({ErrorCode.UNAVAILABLE, ErrorCode.RATE_LIMITED, ErrorCode.MAILBOX_DIRTY})
RETRY_START_S, RETRY_CAP_S, RETRY_BUDGET_S = 0.05, 2.0, 30.0


def retryable(exc: BaseException) -> bool:
    """True for a ServerError whose code means "try again later"."""
    return isinstance(exc, ServerError) and exc.code in RETRYABLE


def retry_after_s(exc: BaseException) -> float:
    """The server's retry-after hint of an ERROR in seconds (0.0 when it gave none)."""
    return getattr(exc, "retry_after_ms", 0) / 1000


class Backoff:
    """Delays start, 2*start, ... capped at `cap`; `budget` seconds in all (None: no limit)."""

    def __init__(self, start: float = RETRY_START_S, cap: float = RETRY_CAP_S,
                 budget: Optional[float] = RETRY_BUDGET_S) -> None:
        self.start, self.cap, self.budget = start, cap, budget
        self.delay = start
        self.began: Optional[float] = None
        self.attempts = 0

    def charge(self, exc: BaseException, delay: float = 0.0) -> None:
        """Re-raise `exc` when waiting `delay` (default: its retry-after hint) more would
        pass the budget; the caller waits elsewhere (the RateGate)."""
        now = time.monotonic()
        if self.began is None:
            self.began = now
        if self.budget is not None and now + max(delay, retry_after_s(exc)) - self.began > self.budget:
            raise exc

    async def wait(self, exc: BaseException) -> None:
        """Sleep before the next attempt, or re-raise `exc` when the budget is spent."""
        delay = max(self.delay, retry_after_s(exc))
        self.charge(exc, delay)
        self.attempts += 1
        await asyncio.sleep(delay)
        self.delay = min(self.delay * 2, self.cap)


async def with_retry(call: Callable[[], Awaitable[T]], backoff: Optional[Backoff] = None) -> T:
    """`await call()` again after each retryable ServerError until the backoff budget is
    spent (then that error is raised); other errors propagate at once."""
    backoff = backoff or Backoff()
    while True:
        try:
            return await call()
        except ServerError as exc:
            if exc.code not in RETRYABLE:
                raise
            await backoff.wait(exc)
