"""Run one store call per Redis instance, the instances concurrently (docs/decisions/0096 §4).

A read or write that covers several commit buckets (a batch of records, the tails of a
session's conversations, the 256 in-flight sets) is split by the instance of each item
(RedisTopology.group_by), each instance's share goes in ONE pipelined round trip as
before, and the instances run concurrently. With one instance the call is made exactly
as before: one group, awaited directly (same commands, same order, same round trips).
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Sequence, TypeVar

T = TypeVar("T")


async def gather_all(aws: Sequence[Awaitable[T]]) -> list[T]:
    """Await every awaitable concurrently and return their results in order. Waits for
    all of them even when one fails (no call is left running unobserved), then raises
    the first failure in order (a typed store error: each call has its own boundary)."""
    if len(aws) == 1:
        return [await aws[0]]
    got = await asyncio.gather(*aws, return_exceptions=True)
    for r in got:
        if isinstance(r, BaseException):
            raise r
    return list(got)  # type: ignore[arg-type]


async def spread(topology: Any, items: Sequence[Any], client_of: Callable[[Any], Any],
                 run: Callable[[Any, list[Any]], Awaitable[Sequence[T]]]) -> list[T]:
    """`run(client, its items)` once per instance holding some of `items` (by
    `client_of(item)`), concurrently; `run` returns one result per item given, in their
    order; the results come back in the order of `items`."""
    if not items:
        return []
    indexed = list(enumerate(items))
    groups = topology.group_by(indexed, lambda pair: client_of(pair[1]))
    if len(groups) == 1:
        return list(await run(groups[0][0], list(items)))
    parts = await gather_all([run(client, [item for _, item in group]) for client, group in groups])
    out: list[Any] = [None] * len(items)
    for (_, group), part in zip(groups, parts):
        if len(part) != len(group):
            raise AssertionError("a per-instance call returned a result count unlike its items")
        for (i, _), r in zip(group, part):
            out[i] = r
    return out
