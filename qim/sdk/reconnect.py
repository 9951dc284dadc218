"""The connection supervisor of a ClientRuntime: the one task that keeps it connected
(docs/design.md §9; docs/sdk.md "Connection states"; docs/decisions/0034).

A runtime is always in one of three conditions, and the app is told which by a
ConnectionState event: connected (`ready`), trying with bounded backoff
(`connecting`, `syncing`, `reconnecting`), or stopped for a stated reason (`offline`
with "closed by the app", "token refused", "token expired", "tls refused", "store
identity mismatch", "connect failed: ...", "connection lost"; or `kicked`). One task
runs the whole loop — open (TCP, TLS, AUTH), sync (REBUILD, mailbox, resends,
after-sync hooks), wait for that connection to end, back off, open again — so no
reconnect is ever started beside a running one and none is ever missing: a sync that
returns on a connection that is already gone fails (ConnectionLost), and the loop
waits on `conn.closed` itself instead of a close callback that may run while an
attempt is still in flight.

An explicit `connect()` starts the loop (or joins a running one) and returns at the
next `ready`. Until its first AUTH succeeded, a failure ends it and is raised to the
app (an unreachable endpoint, a refused token, TLS, a transient ERROR past
`retry_budget_s`); so does an ERROR of its first sync. After AUTH succeeded once, a
lost connection is a reconnect, not a failed connect: connect() waits on. A
KICKED{TOKEN_EXPIRED} end asks the app's token provider again and reconnects
(told "token expired"); without a provider the next AUTH is refused and the runtime
stops "token expired". With `auto_reconnect=False` a connection lost after `ready`
stops the loop ("connection lost"; pending sends stay for the next connect()).
Every attempt is bounded (CONNECT_TIMEOUT_S for TCP, TLS, AUTH and the token
provider; PING probes for every request of the sync), and an unexpected exception is
a failed attempt (logged), never a silent end of the loop. The waits (`reconnect_wait`,
docs/decisions/0078): the first attempt after a ready connection was lost waits
uniform(0, min(FIRST_SPREAD_S, cap)) — the devices of a gateway that went away do not
come back in one burst, as a first retry of 25–75 ms made them; later ones wait their
backoff jittered to uniform(½, 1½) of it (`jittered`); a server's retry-after hint (a
RATE_LIMITED, or the UNAVAILABLE of a gateway whose login queue is full) is the
earliest retry, stretched by up to 10 % so the clients it refused together do not
return together.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Awaitable, Callable, Optional

from qim.errors import ErrorCode, QimError, TlsError
from qim.sdk.connection import Connection
from qim.sdk.core import RuntimeCore
from qim.sdk.credentials import TokenSource
from qim.sdk.events import ConnectionLost, NotConnected, ServerError
from qim.sdk.model import StoreError
from qim.sdk.retry import RETRYABLE, Backoff

logger = logging.getLogger(__name__)
TOKEN_EXPIRED = "token expired"
FIRST_SPREAD_S = 1.0  # the first reconnect after a lost ready connection: full jitter over this (≤ cap)


def jittered(delay: float) -> float:
    """`delay` (s) spread to uniform(½, 1½) of it, so the clients of a gateway that died
    do not come back to the others in one burst (docs/design.md §13)."""
    return delay * (0.5 + random.random())


def reconnect_wait(delay: float, hint: float, after_ready: bool, cap: float) -> float:
    """Seconds before the next attempt (module docstring): full jitter over
    min(FIRST_SPREAD_S, `cap`) right after a ready connection was lost (`after_ready`),
    else `delay` jittered; never sooner than the server's `hint` (s; 0 = none), which is
    stretched by up to 10 %."""
    wait = random.uniform(0.0, min(FIRST_SPREAD_S, cap)) if after_ready else jittered(delay)
    return max(wait, hint * random.uniform(1.0, 1.1)) if hint > 0 else wait


class Stop(Exception):
    """The loop ends for `reason` (told as ConnectionState offline); `cause` is raised
    to waiting connect() calls; `fail_sends`: waiting sends get `cause` too."""

    def __init__(self, reason: str, cause: BaseException, fail_sends: bool = True) -> None:
        super().__init__(reason)
        self.reason, self.cause, self.fail_sends = reason, cause, fail_sends


class Supervisor:
    """Runs the connection loop of one runtime (module docstring): `open_conn(reconnect)`
    makes an authenticated connection the current one, `sync(conn)` brings it to
    `ready` (the runtime's; redis-py's Retry takes its operation the same way), `core`
    is the shared state, `tokens` the runtime's TokenSource."""

    def __init__(self, core: RuntimeCore, tokens: TokenSource, open_conn: Callable[[bool], Awaitable[Connection]],
                 sync: Callable[[Connection], Awaitable[None]]) -> None:
        self._core, self._tokens, self._open, self._sync = core, tokens, open_conn, sync
        self._task: Optional[asyncio.Task] = None
        self._waiters: list[asyncio.Future] = []  # connect() calls waiting for the next ready
        self.expired = False  # the current connection was ended by KICKED{TOKEN_EXPIRED}

    @property
    def running(self) -> bool:
        """True while the loop runs (connected or trying)."""
        return self._task is not None and not self._task.done()

    async def connect(self) -> None:
        """Start the loop unless it runs, and wait for the next `ready`; raises what
        stopped the loop instead (module docstring)."""
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        if not self.running:
            self._task = asyncio.get_running_loop().create_task(self._run())
        try:
            await fut
        finally:
            if fut in self._waiters:
                self._waiters.remove(fut)

    def cancel(self, exc: BaseException) -> None:
        """The app closed the runtime: end the loop, fail the waiting connect() calls."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._wake(exc)

    def _wake(self, exc: Optional[BaseException] = None) -> None:
        for fut in self._waiters:
            if not fut.done():
                if exc is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(exc)
        self._waiters.clear()

    async def _run(self) -> None:
        core, tuning = self._core, self._core.tuning
        start, cap = tuning.reconnect_backoff
        delay = start
        try:
            first = True  # connect()'s rules until an AUTH succeeded
            budget = Backoff(start, cap, tuning.retry_budget_s)
            refreshed = synced = False
            while not core.closing:
                hint, reason, ready = 0.0, "attempt failed", False
                try:
                    conn = await self._open(not first)
                except ServerError as exc:
                    if exc.code == ErrorCode.BANNED:  # stopped for the ban, never retried (0123, Amendment 2)
                        raise Stop(exc.message, exc, fail_sends=False) from exc
                    if exc.code == ErrorCode.UNAUTHENTICATED:
                        if self._tokens.provider is not None and not refreshed:
                            refreshed = self._tokens.refresh_next = True  # once more with a fresh token
                            continue
                        raise Stop(TOKEN_EXPIRED if self.expired else f"token refused: {exc.message}", exc) from exc
                    if first:
                        if exc.code not in RETRYABLE:
                            raise Stop(f"connect failed: {exc.code.name}", exc, fail_sends=False) from exc
                        try:
                            await budget.wait(exc)  # the explicit connect's retries, within its budget
                        except ServerError:
                            raise Stop(f"connect failed: {exc.code.name}", exc, fail_sends=False) from exc
                        continue
                    hint = exc.retry_after_ms / 1000  # the server said when (RATE_LIMITED): no earlier attempt
                except (StoreError, TlsError) as exc:
                    raise Stop("store identity mismatch" if isinstance(exc, StoreError) else "tls refused",
                               exc) from exc
                except Exception as exc:  # noqa: BLE001 — unreachable, lost in AUTH, token provider failed, a bug
                    if first:
                        raise Stop("connect failed", exc, fail_sends=False) from exc
                    _log_attempt(exc)
                else:
                    first = refreshed = self.expired = False
                    reason, ready = await self._serve(conn, fail_on_error=not synced)
                    synced = synced or ready
                if core.closing:
                    return
                if ready:
                    delay = start
                    if not tuning.auto_reconnect:
                        raise Stop("connection lost", ConnectionLost(reason), fail_sends=False)
                core.set_state("reconnecting", reason)
                await asyncio.sleep(reconnect_wait(delay, hint, ready, cap))  # a retry-after hint is a floor
                delay = min(delay * 2, cap)
        except Stop as stop:
            if not core.closing:
                logger.info("connection stopped: %s", stop.reason)
                core.stop(stop.reason, stop.cause if stop.fail_sends else None)
            self._wake(stop.cause)

    async def _serve(self, conn: Connection, fail_on_error: bool) -> tuple[str, bool]:
        """Sync on `conn`, then wait until it ends: (why it ended, whether it was ready).
        Stop for a store mismatch, and for an ERROR of the first sync of an explicit
        connect (`fail_on_error`)."""
        ready = False
        try:
            await self._sync(conn)
            ready = True
            self._wake()
        except (ConnectionLost, NotConnected):
            pass  # lost during the sync: a reconnect
        except StoreError as exc:
            raise Stop("store identity mismatch", exc) from exc
        except ServerError as exc:
            if fail_on_error:
                raise Stop(f"connect failed: {exc.code.name}", exc, fail_sends=False) from exc
            _log_attempt(exc)
        except Exception as exc:  # noqa: BLE001 — a bug of ours: reconnect, keep it visible
            _log_attempt(exc)
        finally:
            if not ready:
                conn.abort("sync failed")
        reason = await asyncio.shield(conn.closed)  # a cancelled loop must not cancel the future
        return (TOKEN_EXPIRED if self.expired else reason), ready


def _log_attempt(exc: BaseException) -> None:
    if isinstance(exc, (QimError, OSError, asyncio.TimeoutError)):  # incl. TokenProviderError
        logger.debug("connection attempt failed: %s", exc.__class__.__name__)
    else:
        logger.warning("connection attempt failed: %r", exc)
