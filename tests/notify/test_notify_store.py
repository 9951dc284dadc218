"""The NotificationService's store on a real Redis (qim/stores/redis/notify.py;
docs/decisions/0135, 0144): the claim per (device, message) is taken once, a replay finds it
made, only the attempt holding it renews it before a request; the per-device badge versions never go back (an older alert carries the newer
badge, a stale silent update is skipped); a badge settle that lowers the badge records
the user as fallen in the same script, one that raises it does not, and a fall handled
is dropped only if no newer one came; the session checkpoints and badge marks read."""

from __future__ import annotations

import asyncio

import pytest

from qim.infra.redis.client import connect
from qim.stores.notify import AlertKey
from qim.stores.redis.badges import BADGE_FELL_KEY, RedisBadgeStore
from qim.stores.redis.keys import session_shard_checkpoint_key
from qim.stores.redis.notify import RedisNotifyStore

T, ME = 0, 42
C1 = bytes([1]) + b"\x01" * 15
M1, M2 = b"\x01" * 16, b"\x02" * 16


@pytest.fixture
async def redis(private_redis):
    client = connect(private_redis.addr)
    await client.hset(session_shard_checkpoint_key(0), mapping={"oe": "3", "p": "17"})
    yield client
    await client.aclose()


async def test_a_claim_is_taken_once_and_a_replay_finds_it_made(redis):
    store = RedisNotifyStore(redis)
    keys = [AlertKey(ME, 1, M1), AlertKey(ME, 2, M1)]
    assert await store.claim(T, keys, 60_000) == ["new", "new"]
    assert await store.claim(T, keys, 60_000) == ["claimed", "claimed"]  # another node, meanwhile
    await store.sent(T, keys[:1])
    assert await store.claim(T, keys + [AlertKey(ME, 1, M2)], 60_000) == ["sent", "claimed", "new"]


async def test_a_claim_of_a_dead_node_ends_and_can_be_taken_again(redis):
    store = RedisNotifyStore(redis)
    key = [AlertKey(ME, 1, M1)]
    assert await store.claim(T, key, 1000) == ["new"]
    await redis.pexpire(next(iter(await redis.keys("qim:notify:a:*"))), 1)  # its claim time is over
    while await redis.exists(*await redis.keys("qim:notify:a:*") or ["none"]):  # noqa: ASYNC110 (Redis expiry)
        await asyncio.sleep(0.01)
    assert await store.claim(T, key, 1000) == ["new"]


async def test_a_claim_is_renewed_only_by_its_own_attempt(redis):
    store = RedisNotifyStore(redis)
    key, other = AlertKey(ME, 1, M1), AlertKey(ME, 2, M1)
    assert await store.claim(T, [key], 60_000, "cA") == ["new"]
    assert await store.renew(T, key, "cA", 60_000) is True
    assert await store.renew(T, key, "cB", 60_000) is False  # another attempt's claim
    await store.sent(T, [key])
    assert await store.renew(T, key, "cA", 60_000) is False  # made meanwhile: not to be sent again
    assert await store.renew(T, other, "cA", 60_000) is True  # expired, nobody took it: taken again
    assert await store.claim(T, [other], 60_000, "cB") == ["claimed"]
    with pytest.raises(ValueError):
        await store.claim(T, [key], 1000, "s")  # "s" is a made alert, never a claim


async def test_badge_versions_never_go_back_per_device(redis):
    store = RedisNotifyStore(redis)
    assert await store.badge_versions(T, ME, [(1, 5, 3), (2, 5, 3)], silent=False) == [(5, 3), (5, 3)]
    assert await store.badge_versions(T, ME, [(1, 7, 0)], silent=True) == [(7, 0)]  # a fall
    # a late alert read at version 6: device 1 gets the newer badge it already had, device 2 v6
    assert await store.badge_versions(T, ME, [(1, 6, 1), (2, 6, 1)], silent=False) == [(7, 0), (6, 1)]
    assert await store.badge_versions(T, ME, [(1, 7, 0), (2, 5, 3)], silent=True) == [None, None]  # stale
    assert await store.badge_versions(T, ME, [(1, 7, 0)], silent=False) == [(7, 0)]  # same version: sent


async def test_a_falling_badge_is_recorded_with_its_settle_and_dropped_once_handled(redis):
    badges, store = RedisBadgeStore(redis), RedisNotifyStore(redis)
    assert await badges.settle(0, 3, T, ME, {C1: 4}, []) == (4, 1, True)
    assert await store.fell(redis, 100) == []  # a rise is no fall
    assert await badges.settle(0, 3, T, ME, {C1: 1}, []) == (1, 2, True)
    fell = await store.fell(redis, 100)
    assert [(f.tenant, f.user, f.version) for f in fell] == [(T, ME, "2")]
    assert await badges.settle(0, 3, T, ME, {C1: 0}, []) == (0, 3, True)  # falls again meanwhile
    await store.fell_done(redis, fell)  # handled at version 2: the newer fall stays
    assert [f.version for f in await store.fell(redis, 100)] == ["3"]
    await store.fell_done(redis, await store.fell(redis, 100))
    assert await redis.hlen(BADGE_FELL_KEY) == 0


async def test_checkpoints_and_marks_are_read_as_the_projection_left_them(redis):
    badges, store = RedisBadgeStore(redis), RedisNotifyStore(redis)
    assert await store.checkpoints([0, 1]) == {0: 17, 1: -1}
    await badges.mark(T, ME, [C1])
    assert await store.marked(T, [(ME, C1), (43, C1)]) == {(ME, C1)}
    await badges.settle(0, 3, T, ME, {C1: 1}, await badges.dirty(redis, 100))
    assert await store.marked(T, [(ME, C1)]) == set()
