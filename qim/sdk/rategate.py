"""One runtime's gate for the requests the gateway's send-rate buckets charge.

The gateway charges every SEND_MESSAGE, MARK_READ, RECALL_MESSAGE, CREATE_GROUP,
LEAVE_GROUP, SET_GROUP_TITLE, JOIN_ROOM and ROOM_SEND (qim.protocol.RATE_LIMITED_OPCODES)
one token of the user's bucket, and
refuses one that finds the bucket empty with ERROR(RATE_LIMITED, retry_after_ms): the
time until one token is there again. Every transmission of those opcodes goes through
the runtime's RateGate, whoever makes it (Sender, its UNAVAILABLE retransmissions and
ACK-deadline repeats, Sessions' MARK_READ, ClientRuntime.request for recall and
groups): a gate for sends alone leaves the others to take the token a paced retry was
waiting for, and every loser is refused again (the storm CI saw: 31 refusals for 8
sends).

- Paced (the gateway advertised its limit in AuthOk.send_rate_per_s / send_burst,
  `limit()` at each connection): the gate mirrors the bucket locally at that rate and
  half its size, full at each connection (the connection's bucket is new), and a
  request passes when the mirror holds a token, in ticket order, any number in flight;
  so a client alone on its user's bucket is never refused. Half the size leaves room
  for a second of jitter between leaving here and being charged there (frames queued
  behind each other arrive closer together than they left: docs/decisions/0056). A
  retransmission after a "not now" answer (UNAVAILABLE, MAILBOX_DIRTY) takes no token
  (`again(charged=False)`: the gateway gave its token back). A RATE_LIMITED (another
  device of the user drained the shared bucket) empties the mirror and holds
  everything until its hint; pacing then goes on as before. The rules below are for a
  gateway that advertises nothing.
- Open (no refusal seen): a request passes at once, any number in flight.
- `refused(hint)`: the connection reports EVERY RATE_LIMITED reply here, also one whose
  waiter gave up. From then on nothing passes before `until` = arrival + hint (the
  latest such time), and the gate is closed: one request at a time holds its single
  slot from transmission to answer, the waiter with the smallest ticket first (tickets
  are taken when a request is first made, so sends keep submission order and a send is
  never transmitted before its previous one was answered: the writer would refuse it,
  after the bucket charged it), each PACE_MARGIN x `interval` after the one before.
  `interval` estimates the bucket's refill interval: the largest hint of the episode
  (a hint is what is left of one interval when the refusal was made, so it is short by
  the time since the last token was taken), raised to gap + hint when the slot holder
  is refused: sent `gap` after an admitted one, it needed `hint` more. Pacing a little
  slower than the bucket lets it gather a spare token (up to its burst), which absorbs
  the jitter of a loaded machine instead of a refusal for each late-then-early pair.
- It opens again when the slot holder's request was admitted (any answer but
  RATE_LIMITED), nobody waits and `until` passed.

Bound: a refused request waits its hint and then goes out alone, so no other request
of its runtime takes the token it waits for: it is refused again only when the
interval was underestimated by more than the margin (each such refusal raises the
estimate) or another device of the user took the token (they share the bucket).
About one refusal per request at worst, also on a slow machine: one slot keeps a late
timer from releasing a burst, and keeps frames a starved gateway reads late from
arriving together.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Awaitable, Callable, Optional, TypeVar

from qim.errors import ErrorCode
from qim.sdk.events import ServerError
from qim.sdk.retry import RETRYABLE, Backoff, retry_after_s

T = TypeVar("T")
PACE_MARGIN = 1.1  # pace while closed at 1/1.1 of the estimated rate (module doc)
NO_HINT_S = 0.05   # a RATE_LIMITED without retry_after_ms: assume this much


class Permit:
    """Leave to transmit one request (and its retransmissions, paced by `again()`).
    `close(outcome)` exactly once (None: the server answered other than ERROR)."""

    __slots__ = ("_gate", "ticket", "slot", "sent_at", "_open")

    def __init__(self, gate: "RateGate", ticket: int, slot: bool) -> None:
        self._gate, self.ticket, self.slot, self._open = gate, ticket, slot, True
        self.sent_at = time.monotonic()  # of its latest transmission (again() moves it)

    async def again(self, charged: bool = True) -> None:
        """Before another transmission under this permit (an ACK-deadline repeat, a
        retry after UNAVAILABLE): it costs a token too, so it waits like a new request;
        `charged=False` after a "not now" answer the gateway refunded (paced gate)."""
        await self._gate._again(self, charged)

    def close(self, outcome: Optional[BaseException] = None) -> None:
        """The request is over: `outcome` None or a ServerError other than RATE_LIMITED =
        admitted by the bucket; ServerError(RATE_LIMITED) = refused; anything else (lost
        connection, cancelled, never sent) = no answer. Idempotent."""
        if self._open:
            self._open = False
            self._gate._closed(self, outcome)


class RateGate:
    """Paces one runtime's counted requests after RATE_LIMITED (module doc). Lives as long
    as the runtime (the bucket outlives a connection). `refusals` counts hints received."""

    def __init__(self) -> None:
        self._until = 0.0            # monotonic seconds: no counted request leaves before
        self._interval = 0.0         # seconds between releases while closed (largest hint)
        self._last = float("-inf")   # monotonic time of the last release while closed
        self._admitted_at: Optional[float] = None  # sent_at of the last slot request admitted
        self._closed_gate = False
        self._busy = False           # the single slot is held
        self._queue: list[tuple[int, int, asyncio.Future]] = []
        self._order = itertools.count()
        self._tickets = itertools.count(1)
        self._timer: Optional[asyncio.TimerHandle] = None
        self._rate = 0.0    # the advertised limit (requests/s; 0: none): paced mode
        self._cap = 0.0     # the local mirror's size
        self._tokens = 0.0
        self._stamp = 0.0   # monotonic time the mirror was last refilled
        self._released = 0  # waiters given a permit whose task has not resumed yet
        self.refusals = 0

    @property
    def open(self) -> bool:
        """True while no refusal holds requests back."""
        return not self._closed_gate

    def limit(self, rate_per_s: int, burst: int) -> None:
        """A new connection's advertised limit (AuthOk; 0: none): paced mode with a full
        mirror of half the bucket (module doc), else the refusal-driven rules."""
        self._rate = float(rate_per_s)
        self._cap = float(max(1, burst // 2)) if rate_per_s > 0 else 0.0
        self._tokens, self._stamp = self._cap, time.monotonic()
        if self._rate:
            self._closed_gate = False
        if self._queue:
            self._pump()

    def _take(self, now: float) -> bool:
        """One token of the mirror if it has one (always True when not paced)."""
        if not self._rate:
            return True
        self._tokens = min(self._cap, self._tokens + (now - self._stamp) * self._rate)
        self._stamp = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True

    def _token_at(self, now: float) -> float:
        """When the mirror holds a token again."""
        have = min(self._cap, self._tokens + (now - self._stamp) * self._rate)
        return now if have >= 1.0 else now + (1.0 - have) / self._rate

    def ticket(self) -> int:
        """A new request's place in line (kept across its retries)."""
        return next(self._tickets)

    def refused(self, retry_after_ms: int) -> None:
        """A RATE_LIMITED reply arrived now with this hint in ms (0: none given, NO_HINT_S)."""
        hint = retry_after_ms / 1000 if retry_after_ms > 0 else NO_HINT_S
        self.refusals += 1
        now = time.monotonic()
        self._until = max(self._until, now + hint)
        if self._rate:  # the user's bucket is empty there: so is the mirror
            self._tokens, self._stamp = 0.0, now
            return
        self._interval = max(self._interval, hint)
        self._closed_gate = True

    def try_acquire(self, ticket: int) -> Optional[Permit]:
        """A permit now if the gate is open and nobody waits, else None (then `acquire`).
        Lets a caller queue its first frame synchronously (send order). A waiter the pump
        let through but whose task has not run yet still counts as waiting: a later
        ticket passing here first would transmit before it (its send would name one the
        writer has not seen, and be refused with every send behind it)."""
        now = time.monotonic()
        if self._closed_gate or self._queue or self._released or now < self._until or not self._take(now):
            return None
        return Permit(self, ticket, False)

    async def acquire(self, ticket: int) -> Permit:
        """Wait for this request's turn (module doc); cancellation-safe."""
        permit = self.try_acquire(ticket)
        if permit is not None:
            return permit
        fut = asyncio.get_running_loop().create_future()
        heapq.heappush(self._queue, (ticket, next(self._order), fut))
        self._pump()
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                fut.result().close(asyncio.CancelledError())  # let through, never used
            raise
        finally:
            if fut.done() and not fut.cancelled():
                self._released -= 1  # resumed: its caller transmits before it awaits again

    async def through(self, send: Callable[[Permit], Awaitable[T]], ticket: Optional[int] = None) -> T:
        """One attempt of a counted request: acquire, `await send(permit)`, close."""
        permit = await self.acquire(ticket if ticket is not None else self.ticket())
        try:
            result = await send(permit)
        except BaseException as exc:
            permit.close(exc)
            raise
        permit.close(None)
        return result

    # --- internals -------------------------------------------------------------------
    def _pump(self) -> None:
        """Release the waiters whose time has come, else set a timer for the next."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while True:
            while self._queue and self._queue[0][2].done():
                heapq.heappop(self._queue)  # a cancelled waiter
            if not self._queue or self._busy:
                return
            now = time.monotonic()
            at = self._next_at() if self._closed_gate else self._until
            if self._rate and now >= at:
                at = self._token_at(now)
            if now < at or not self._take(now):
                self._timer = asyncio.get_running_loop().call_later(max(at - now, 0.001), self._pump)
                return
            ticket, _, fut = heapq.heappop(self._queue)
            if self._closed_gate:
                self._busy, self._last = True, now
            fut.set_result(Permit(self, ticket, self._closed_gate))  # sent_at: now
            self._released += 1
            if self._closed_gate:
                return  # one slot; open: everyone whose time has come goes

    async def _again(self, permit: Permit, charged: bool) -> None:
        if self._closed_gate and not permit.slot:  # closed since it was let through: in line for the slot
            turn = await self.acquire(permit.ticket)
            permit.slot, turn._open = turn.slot, False  # `permit` holds what `turn` was given
            return
        while True:
            at = self._next_at() if permit.slot else self._until
            now = time.monotonic()
            if now >= at and (not charged or permit.slot or self._take(now)):
                break
            await asyncio.sleep(max(at, self._token_at(now) if self._rate else at) - now)
        permit.sent_at = time.monotonic()
        if permit.slot:
            self._last = permit.sent_at

    def _next_at(self) -> float:
        """When the slot may transmit next while closed."""
        return max(self._until, self._last + PACE_MARGIN * self._interval)

    def _closed(self, permit: Permit, outcome: Optional[BaseException]) -> None:
        hint = None  # seconds, when refused
        if isinstance(outcome, ServerError) and outcome.code == ErrorCode.RATE_LIMITED:
            hint = retry_after_s(outcome) or NO_HINT_S
        admitted = outcome is None or (isinstance(outcome, ServerError) and hint is None)
        if permit.slot:
            self._busy = False
            if hint is not None and self._admitted_at is not None:  # sent `gap` after a token was taken: short by hint
                self._interval = max(self._interval, permit.sent_at - self._admitted_at + hint)
            self._admitted_at = permit.sent_at if admitted else None
            if admitted and not self._waiting() and time.monotonic() >= self._until:
                self._closed_gate, self._interval, self._last = False, 0.0, float("-inf")
                self._admitted_at = None
        # call_soon: a refused caller queues again (its ticket first in line) before the pump
        asyncio.get_running_loop().call_soon(self._pump)

    def _waiting(self) -> bool:
        return any(not fut.done() for _, _, fut in self._queue)


async def gated_retry(gate: RateGate, send: Callable[[Permit], Awaitable[T]], backoff: Backoff) -> T:
    """`await send(permit)` through the gate until it is answered: RATE_LIMITED queues it
    again (keeping its ticket; the hint is the gate's), UNAVAILABLE / MAILBOX_DIRTY back
    off first; past `backoff`'s budget the error is raised, and so is every other error."""
    ticket = gate.ticket()
    while True:
        try:
            return await gate.through(send, ticket)
        except ServerError as exc:
            if exc.code not in RETRYABLE:
                raise
            if exc.code == ErrorCode.RATE_LIMITED:
                backoff.charge(exc)
            else:
                await backoff.wait(exc)
