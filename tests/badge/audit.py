"""UserBadgeState audit for tests (docs/decisions/0129): the badge a user's stored
UserBadgeState holds against the sum the server's list shows, and a sampler that records
every (badge, version) seen so a test can check the version never went backwards."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import AsyncIterator

from qim.dev.redis_instances import layout_of
from qim.services.session.badge import badge_of
from qim.stores.redis.badges import RedisBadgeStore
from qim.stores.redis.topology import topology_of
from tests.e2e.sdkclient import server_list


def badge_store(engines) -> RedisBadgeStore:
    """A RedisBadgeStore over the Redis instances of an EngineSet (tests/fixtures.py)."""
    es = engines
    return RedisBadgeStore(topology_of(layout_of(es.redis_addrs, es.shard_count)))


async def listed_badge(c) -> int:
    """The badge the server's list of `c`'s user shows (the audit rule, badge.badge_of)."""
    return badge_of(list((await server_list(c)).values()), int(time.time() * 1000))


async def stored(store: RedisBadgeStore, user: int, tenant: int = 0) -> tuple[int, int]:
    """(badge, version) of `user`'s UserBadgeState."""
    return (await store.badges_of(tenant, [user]))[user]


@contextlib.asynccontextmanager
async def sampled(store: RedisBadgeStore, user: int, period_s: float = 0.05) -> AsyncIterator[list[tuple[int, int]]]:
    """Samples of (badge, version) of `user` taken every `period_s` while inside."""
    seen: list[tuple[int, int]] = []

    async def loop() -> None:
        while True:
            with contextlib.suppress(Exception):  # an engine busy or restarting: the next sample
                seen.append(await stored(store, user))
            await asyncio.sleep(period_s)

    task = asyncio.get_running_loop().create_task(loop())
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def versions_only_grow(seen: list[tuple[int, int]]) -> bool:
    """Every version is >= the one before, and a change of badge came with a higher version."""
    return all(v2 >= v1 and (b2 == b1 or v2 > v1) for (b1, v1), (b2, v2) in zip(seen, seen[1:]))
