"""The move lock: one runner at a time for a MailboxShard's or the commit buckets' moves
(`qimctl redis move-shard` / `move-bucket`; amendments of docs/decisions/0104 and 0113).

A STRING on the home, `qim:movelock:shard:<s>` (one per shard) or `qim:movelock:bucket`
(one for every bucket: bucket moves run one at a time, decision 0113 point 6), holding
the runner's token — host, pid, a random part and what it moves, so that a refused
runner can name the running one — with an expiry of LOCK_TTL_S that the runner renews
every third of it (redis-py's Lock: SET NX PX, compare-and-extend, compare-and-delete).
A second runner refuses at once (MoveRefused naming the holder and how long its lock
lasts); a runner continuing a crashed move takes the lock once the dead runner's lock
expired. Every change of the placement map a runner makes is one MULTI under WATCH of
its lock: a runner that lost its lock (paused longer than LOCK_TTL_S while another took
over) cannot mark or switch anything.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import time
from typing import Any, Callable

from redis.asyncio.lock import Lock
from redis.exceptions import LockError, WatchError

from qim.errors import ConfigError, EngineError

LOCK_TTL_S = 15.0  # a dead runner's lock is gone this long after its last renewal
PROGRESS_S = 5.0  # a wait longer than this prints a line every PROGRESS_S


class MoveRefused(ConfigError):
    """The move was refused before anything changed, or cannot go on (the message says
    why and what to do); `qimctl` exits non-zero with it."""


def shard_lock_key(shard: int) -> str:
    """STRING on the home: the token of the runner moving MailboxShard `shard`, TTL."""
    return f"qim:movelock:shard:{shard}"


def bucket_lock_key() -> str:
    """STRING on the home: the token of the runner moving a commit bucket, TTL."""
    return "qim:movelock:bucket"


class MoveLock:
    """The lock `key` on `home` for a runner described by `what` (e.g. "shard 7 -> B").
    `async with` takes it (MoveRefused when another runner holds it), renews it while
    the block runs and releases it at the end (only if still its own)."""

    def __init__(self, home: Any, key: str, what: str, command: str) -> None:
        self._home, self.key, self._command = home, key, command
        stamp = time.strftime("%H:%M:%SZ", time.gmtime())
        self.token = f"{socket.gethostname()} pid {os.getpid()} ({secrets.token_hex(4)}): {what} since {stamp}"
        self._lock = Lock(home, key, timeout=LOCK_TTL_S, blocking=False)
        self._renewing: asyncio.Future | None = None

    async def __aenter__(self) -> "MoveLock":
        if not await self._lock.acquire(token=self.token):
            holder = await self._home.get(self.key)
            left = max(int(await self._home.pttl(self.key)), 0) / 1000
            name = holder.decode(errors="replace") if holder else "a runner that just finished"
            raise MoveRefused(f"another {self._command} is running ({name}); its lock lasts {left:.0f} s more and "
                              "is renewed while it runs: wait for it to finish (if that run died, run this "
                              f"again once its lock has expired, at most {LOCK_TTL_S:.0f} s)")
        self._renewing = asyncio.ensure_future(self._renew())
        return self

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(LOCK_TTL_S / 3)
            await self._lock.reacquire()  # LockNotOwnedError when lost: the guarded MULTI refuses then

    async def __aexit__(self, *exc: object) -> None:
        if self._renewing is not None:
            self._renewing.cancel()
        try:
            await self._lock.release()
        except LockError:
            pass  # expired or taken over: not ours to delete (the MULTI check reported it)

    async def commit(self, change: Callable[[Any], None]) -> None:
        """Run `change(pipe)` (queued commands) as one MULTI on the home, only while the
        lock is this runner's (WATCH + GET); EngineError when it is not any more."""
        async with self._home.pipeline(transaction=True) as pipe:
            await pipe.watch(self.key)
            if await pipe.get(self.key) != self.token.encode():
                raise EngineError(f"the move lost its lock {self.key} (paused longer than {LOCK_TTL_S:.0f} s?): "
                                  "nothing changed by this step; run the move again")
            pipe.multi()
            change(pipe)
            try:
                await pipe.execute()
            except WatchError:
                raise EngineError(f"the move lost its lock {self.key} during a change of the placement map: "
                                  "nothing changed by this step; run the move again") from None


async def wait_saying(seconds: float, say: Callable[[str], None], what: str) -> None:
    """Sleep `seconds`, saying "<what>: N s left" every PROGRESS_S when it is longer."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        await asyncio.sleep(min(left, PROGRESS_S))
        left = end - time.monotonic()
        if left > 0.5:
            say(f"{what}: {left:.0f} s left")
