"""A shard's start in parts that run together (docs/decisions/0060-offsets-off-the-fetch-connection.md).

A node serving a shard starts several independent parts (the mailbox's dispatch partition
and presence partition, the session's projection and presence), each on its own broker
consumer. Started one after the other, a takeover waits for the sum of their broker calls;
together, for the slowest.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable


async def start_together(*parts: Awaitable[None]) -> None:
    """Await every part; once all are done, raise the first failure (so the keeper's
    on_release, which undoes every part, never runs while a part is still starting)."""
    results = await asyncio.gather(*parts, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
