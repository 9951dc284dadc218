"""Revocations over three core Redis instances (docs/decisions/0100): a revocation is
written to every core instance, so the reserve of a conversation on ANY instance refuses
the revoked token (decision 0080 reads the cutoff inside the reserve, on the
conversation's instance); with a core instance down the revoke fails, typed, naming it,
publishes nothing, and a retry once it is back writes the newest cutoff everywhere.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from qim._core import ids
from qim.stores.errors import StoreUnavailable
from qim.stores.redis.backend import RedisBackend
from qim.stores.redis.errors import Revoked
from qim.stores.redis.keys import revocation_key
from qim.stores.revocations import open_revocations
from tests.stores.conftest import Conv
from tests.stores.test_topology_core import (  # noqa: F401 (fixtures)
    CLOCK_MS,
    TENANT,
    core_engines,
    groups_per_instance,
    layout_of,
    wiped,
)

USER, DEVICE = 6, 3
TTL_S = 3600


async def refused_on_each_instance(stores, gids: list[int], iat: int) -> list[bool]:
    """Whether a send of (USER, DEVICE) with a token issued at `iat` is refused as revoked
    in each group of `gids` (one reserve each)."""
    out = []
    for n, gid in enumerate(gids):
        conv = Conv(stores, TENANT, ids.conversation_id_group(TENANT, gid), clock_ms=CLOCK_MS + n)
        res = conv.reservation(USER, b"r%015d" % gid)
        res.device_id, res.token_iat = DEVICE, iat
        try:
            await stores.commits.reserve(res)
            out.append(False)
        except Revoked:
            out.append(True)
    return out


async def test_a_revocation_is_refused_by_the_reserve_on_every_core_instance(wiped):  # noqa: F811 (the fixture)
    layout = layout_of(wiped)
    gids = groups_per_instance(layout, 1)
    stores, revocations = RedisBackend(layout), open_revocations(layout)
    try:
        cutoff = int(time.time())
        await revocations.revoke(TENANT, USER, DEVICE, cutoff, TTL_S)
        assert await refused_on_each_instance(stores, gids, cutoff) == [True, True, True]
        assert await revocations.cutoffs([(TENANT, USER, DEVICE)]) == [cutoff]  # AUTH's read (home)
        # a token issued after the cutoff still sends, on every instance
        assert await refused_on_each_instance(stores, gids, cutoff + 1) == [False, False, False]
    finally:
        await stores.close()
        await revocations.close()
    for eng in wiped[:3]:
        assert int(eng.client().get(revocation_key(TENANT, USER, DEVICE))) == cutoff


async def test_a_core_instance_down_fails_the_revoke_and_a_retry_converges(wiped):  # noqa: F811 (the fixture)
    layout = layout_of(wiped)
    gids = groups_per_instance(layout, 1)
    key = revocation_key(TENANT, USER, DEVICE)
    revocations = open_revocations(layout)
    feed = await revocations.subscribe()
    down = wiped[1]
    try:
        down.stop()
        first = int(time.time())
        with pytest.raises(StoreUnavailable) as err:
            await revocations.revoke(TENANT, USER, DEVICE, first, TTL_S)
        assert down.addr in str(err.value) and "1 of 3" in str(err.value)
        assert await feed.next() is None  # nothing published for a revoke that failed
        # the instances it reached keep the cutoff (a retry raises it everywhere)
        assert [int(e.client().get(key) or 0) for e in (wiped[0], wiped[2])] == [first, first]
        down.start()
        # the retry of an operator whose clock is behind: the newest cutoff wins everywhere
        deadline = time.monotonic() + 60
        while True:
            try:
                notified = await revocations.revoke(TENANT, USER, DEVICE, first - 100, TTL_S)
                break
            except StoreUnavailable:  # the pool's connection to the restarted instance
                assert time.monotonic() < deadline, "the revoke did not succeed after the instance came back"
                await asyncio.sleep(0.5)
        assert notified == 1
        assert await feed.next() == ((TENANT, USER, DEVICE), first)
        assert [int(e.client().get(key)) for e in wiped[:3]] == [first] * 3
        stores = RedisBackend(layout)
        try:
            assert await refused_on_each_instance(stores, gids, first) == [True, True, True]
        finally:
            await stores.close()
    finally:
        await feed.close()
        await revocations.close()
