"""A login's Redis work shares round trips with the other logins of the same event-loop
turn (issue 41, logins per second: the session_epoch INCR and the revocation read were
two redis-py round trips of every login, about a tenth of its gateway CPU). Real Redis
of the test's own; round trips counted on the client side."""

from __future__ import annotations

import asyncio

from qim.infra.redis.client import connect
from qim.stores.redis.keys import revocation_key
from qim.stores.redis.presence import RedisSessionEpochs
from qim.stores.redis.revocations import RevocationStore
from tests.writer.test_send_round_trips import RoundTrips

LOGINS = 50


async def test_fifty_logins_at_once_cost_one_round_trip_each_kind_with_exact_answers(private_redis, monkeypatch):
    client = connect(private_redis.addr)
    try:
        epochs, revocations = RedisSessionEpochs(client), RevocationStore(client)
        await client.set(revocation_key(0, 7, 3), 1_700_000_100)  # device 3 of user 7 revoked at ...100
        await client.set(revocation_key(0, 7, 0), 1_700_000_050)  # the whole of user 7 at ...050
        await client.set(revocation_key(0, 8, 0), 1_700_000_200)
        await epochs.next_epoch(0, 1, 1)  # scripts loaded (a NOSCRIPT reload is no login's cost)
        await revocations.cutoffs([(0, 1, 1)])
        trips = RoundTrips(client, monkeypatch)
        got = await asyncio.gather(*(epochs.next_epoch(0, 1000 + i, 1) for i in range(LOGINS)))
        assert got == [1] * LOGINS and trips.count == 1
        again = await asyncio.gather(*(epochs.next_epoch(0, 1000 + i, 1) for i in range(LOGINS)))
        assert again == [2] * LOGINS and trips.count == 2  # an epoch never goes back
        idents = [(0, 7, 3), (0, 7, 4), (0, 8, 1), (0, 9, 1)] * (LOGINS // 4)
        cut = await asyncio.gather(*(revocations.cutoffs([i]) for i in idents))
        assert cut == [[1_700_000_100], [1_700_000_050], [1_700_000_200], [0]] * (LOGINS // 4)
        assert trips.count == 3
        # the bulk read (a gateway checking its connections again) answers the same
        assert await revocations.cutoffs(idents[:4]) == [1_700_000_100, 1_700_000_050, 1_700_000_200, 0]
    finally:
        await client.aclose()


async def test_a_login_meets_a_redis_that_is_gone_with_a_typed_error(private_redis):
    from qim.stores.errors import StoreUnavailable

    client = connect(private_redis.addr)
    try:
        epochs, revocations = RedisSessionEpochs(client), RevocationStore(client)
        assert await epochs.next_epoch(0, 1, 1) == 1
        private_redis.stop()
        for call in (epochs.next_epoch(0, 1, 1), revocations.cutoffs([(0, 1, 1)])):
            try:
                await asyncio.wait_for(call, 10)
            except StoreUnavailable:
                continue
            raise AssertionError("a login's Redis call answered with Redis gone")
    finally:
        await client.aclose()
