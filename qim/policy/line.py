"""Arrival order for requests whose policy verdicts are asked concurrently
(docs/decisions/0099-send-policy-seam.md).

The RoomWriter applies a request whole, without awaiting, so posts take room_seq in
arrival order. With a send policy a post awaits its verdict first; a `Line` per room
keeps the arrival order anyway: each post takes a place synchronously on arrival (before
its first await), asks the policy concurrently with the posts around it, then waits
until every earlier place of its line is released before it applies.
"""

from __future__ import annotations

import asyncio
from typing import Hashable, Optional


class Place:
    """One request's place in a line: `await wait()` until the earlier ones are done,
    `release()` when done (always: refused, failed or applied; idempotent)."""

    def __init__(self, line: "Line", key: Hashable, before: Optional[asyncio.Future], mine: asyncio.Future) -> None:
        self._line, self._key, self._before, self._mine = line, key, before, mine

    async def wait(self) -> None:
        """Return once the place before this one was released (at once when none)."""
        if self._before is not None and not self._before.done():
            await asyncio.shield(self._before)  # our cancellation must not release the one before

    def release(self) -> None:
        """Let the next place go (after the earlier ones did)."""
        if self._mine.done():
            return
        before = self._before
        if before is None or before.done():
            self._done()
        else:  # released early (a refusal): still after the earlier ones, never before them
            before.add_done_callback(lambda _f: self._done())

    def _done(self) -> None:
        if not self._mine.done():
            self._mine.set_result(None)
        self._line._forget(self._key, self._mine)


class Line:
    """FIFO places per key (a room). Keys without waiting requests hold nothing."""

    def __init__(self) -> None:
        self._tails: dict[Hashable, asyncio.Future] = {}

    def place(self, key: Hashable) -> Place:
        """A place behind every earlier one of `key`; take it before the request's first await."""
        before = self._tails.get(key)
        mine = asyncio.get_running_loop().create_future()
        self._tails[key] = mine
        return Place(self, key, before, mine)

    def _forget(self, key: Hashable, fut: asyncio.Future) -> None:
        if self._tails.get(key) is fut:
            del self._tails[key]

    def __len__(self) -> int:
        return len(self._tails)
