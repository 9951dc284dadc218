"""Send-rate limits of the ConnectionNode (docs/decisions/0021): token buckets per user (across the
user's connections to this gateway) and per connection for the mutating opcodes, and
the RATE_LIMITED error that tells the client when to come back.

A bucket holds up to `burst` tokens and gains `rate_per_s` per second; each mutating
request (LIMITED_OPCODES) takes one token from its connection's bucket and one from
its user's. A request that finds either empty is refused with ERROR(RATE_LIMITED) and
`retry_after_ms`, the time until both hold a token again, and takes nothing (a refused
request never costs the client a later one). A request its backend answered "not now"
(UNAVAILABLE, MAILBOX_DIRTY: e.g. the writer's "previous send not yet sequenced", which
consumes no conversation_seq) gets its tokens back (`refund`), so the client's retry of
it is the only one charged (docs/decisions/0056). AUTH_OK tells the client the tightest
limit it is charged against (`advertised`), so the SDK paces itself below it and a
healthy client is never refused. Reads (pulls) are not limited here: the
per-connection in-flight limit and reply back-pressure bound them (qim/services/gateway/conn.py).

Memory: a full bucket is the same as a new one, so user buckets that refilled are
dropped by a sweep every SWEEP_S; what remains is bounded by the users who sent in the
last burst/rate seconds. The connection cap lives in OnlineRegistry (online.py).
"""

from __future__ import annotations

import math
import time
from typing import Callable, Hashable, Optional

from qim.errors import ErrorCode, RequestError
from qim.protocol import RATE_LIMITED_OPCODES
from qim.services.gateway.metrics import GatewayMetrics

LIMITED_OPCODES = RATE_LIMITED_OPCODES  # defined with the protocol: the SDK's RateGate paces the same set
NOT_NOW = frozenset({ErrorCode.UNAVAILABLE, ErrorCode.MAILBOX_DIRTY})  # a backend's "retry later": refunded
SWEEP_S = 60.0


class RateLimited(RequestError):
    """ERROR(RATE_LIMITED) with a retry-after hint in milliseconds (≥ 1)."""

    def __init__(self, message: str, retry_after_ms: int) -> None:
        super().__init__(ErrorCode.RATE_LIMITED, message)
        self.retry_after_ms = max(1, retry_after_ms)


class TokenBucket:
    """Up to `burst` tokens, refilled at `rate_per_s` per second; starts full at `now`
    (seconds of a monotonic clock)."""

    __slots__ = ("rate", "burst", "tokens", "stamp")

    def __init__(self, rate_per_s: float, burst: int, now: float) -> None:
        if rate_per_s <= 0 or burst < 1:
            raise ValueError("a token bucket needs rate_per_s > 0 and burst >= 1")
        self.rate, self.burst = float(rate_per_s), float(burst)
        self.tokens, self.stamp = float(burst), now

    def _refill(self, now: float) -> None:
        if now > self.stamp:
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now

    def wait_s(self, now: float) -> float:
        """Seconds until one token is there (0.0: one is there now)."""
        self._refill(now)
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate

    def take(self, now: float) -> None:
        """Take one token (call only after wait_s(now) == 0)."""
        self._refill(now)
        self.tokens -= 1.0

    def give_back(self, now: float) -> None:
        """Return one token taken earlier (never above `burst`)."""
        self._refill(now)
        self.tokens = min(self.burst, self.tokens + 1.0)

    def full(self, now: float) -> bool:
        """True when the bucket refilled completely (it equals a new one)."""
        self._refill(now)
        return self.tokens >= self.burst


class SendLimiter:
    """The gateway's buckets: `conn_bucket()` makes one per connection (None when
    QIM_RATE_CONN_PER_S is 0), `admit(user_key, conn_bucket)` charges one mutating
    request or raises RateLimited. `clock` is monotonic seconds (injectable for tests)."""

    def __init__(self, user_per_s: int, user_burst: int, conn_per_s: int, conn_burst: int,
                 metrics: Optional[GatewayMetrics] = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.user_per_s, self.user_burst = user_per_s, user_burst
        self.conn_per_s, self.conn_burst = conn_per_s, conn_burst
        self._m = metrics if metrics is not None else GatewayMetrics()
        self._clock = clock
        self._users: dict[Hashable, TokenBucket] = {}
        self._next_sweep = clock() + SWEEP_S

    @classmethod
    def from_config(cls, config, metrics: Optional[GatewayMetrics] = None) -> "SendLimiter":
        """From GatewayConfig's rate_* fields (QIM_RATE_USER_PER_S / _BURST, QIM_RATE_CONN_PER_S / _BURST)."""
        return cls(config.rate_user_per_s, config.rate_user_burst, config.rate_conn_per_s, config.rate_conn_burst,
                   metrics)

    def conn_bucket(self) -> Optional[TokenBucket]:
        """A new connection's bucket (full), or None when connections are not limited."""
        return TokenBucket(self.conn_per_s, self.conn_burst, self._clock()) if self.conn_per_s else None

    def admit(self, user_key: Hashable, conn: Optional[TokenBucket]) -> None:
        """Charge one mutating request to the connection and the user. RateLimited (and
        nothing charged) when either bucket is empty; retry_after_ms covers both."""
        now = self._clock()
        if now >= self._next_sweep:
            self._sweep(now)
        user = None
        if self.user_per_s:
            user = self._users.get(user_key)
            if user is None:
                user = self._users[user_key] = TokenBucket(self.user_per_s, self.user_burst, now)
        wait_conn = conn.wait_s(now) if conn is not None else 0.0
        wait_user = user.wait_s(now) if user is not None else 0.0
        if wait_conn or wait_user:
            scope = "user" if wait_user >= wait_conn else "connection"
            self._m.rate_limited.labels(scope=scope).inc()
            limit = f"{self.user_per_s}/s per user" if scope == "user" else f"{self.conn_per_s}/s per connection"
            raise RateLimited(f"too many requests ({limit})", math.ceil(max(wait_conn, wait_user) * 1000))
        if conn is not None:
            conn.take(now)
        if user is not None:
            user.take(now)

    def refund(self, user_key: Hashable, conn: Optional[TokenBucket]) -> None:
        """Give back what `admit` charged for a request its backend answered "not now"
        (NOT_NOW): its retry is then the only charge (module docstring)."""
        now = self._clock()
        if conn is not None:
            conn.give_back(now)
        user = self._users.get(user_key)
        if user is not None:
            user.give_back(now)

    def advertised(self) -> tuple[int, int]:
        """(requests per second, burst) of the tightest bucket one connection is charged
        against, for AuthOk.send_rate_per_s / send_burst; (0, 0) when not limited."""
        limits = [(r, b) for r, b in ((self.conn_per_s, self.conn_burst), (self.user_per_s, self.user_burst)) if r]
        if not limits:
            return 0, 0
        return min(r for r, _ in limits), min(b for _, b in limits)

    def _sweep(self, now: float) -> None:
        """Forget the user buckets that refilled (equal to new ones)."""
        self._next_sweep = now + SWEEP_S
        for key in [k for k, b in self._users.items() if b.full(now)]:
            del self._users[key]

    @property
    def tracked_users(self) -> int:
        """User buckets held right now (the sweep keeps this bounded)."""
        return len(self._users)
