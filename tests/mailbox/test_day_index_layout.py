"""The day index's Redis layout (docs/decisions/0064-day-index-sorted-set.md), on a real
Redis: a sorted set whose member per day keeps that day's highest offset (ZADD GT), an
expiry that moves only when a day is new to it, and an index of the old HASH layout
moved into it on the first read, the higher offset of each day and the later expiry
kept. The behaviour every backend shares is in tests/stores/test_mailboxes.py."""

from __future__ import annotations

import random
import time

import pytest

from qim._core import mailbox_seq as mseq
from qim.consts import DAY_MS
from qim.infra.redis.client import connect
from qim.stores.mailboxes import day_of
from qim.stores.redis.keys import days_key, legacy_days_key
from qim.stores.redis.mailboxes import RedisMailboxStore

TENANT = 0
DAY = day_of(time.time_ns() // 1_000_000)


@pytest.fixture
async def box(engines):
    redis = connect(engines.redis_addr)
    user = random.getrandbits(40) + 1
    yield redis, RedisMailboxStore(redis), user
    await redis.aclose()


def member(offset: int) -> bytes:
    return mseq.to_bytes(mseq.compose(1, offset)) + b"group"


async def test_a_day_keeps_its_highest_offset_and_the_expiry_moves_only_for_a_new_day(box):
    redis, store, user = box
    key = days_key(TENANT, user)
    await store.append(TENANT, 40, DAY, [(user, member(40))])
    assert await redis.type(key) == b"zset"
    assert await redis.zscore(key, str(DAY)) == 40
    assert abs(await redis.ttl(key) - store.index_ttl_s) <= 2
    await redis.expire(key, 1_000)
    await store.append(TENANT, 41, DAY, [(user, member(41))])
    await store.append(TENANT, 7, DAY, [(user, member(7))])  # a replayed earlier record
    assert await redis.zscore(key, str(DAY)) == 41
    assert await redis.ttl(key) <= 1_000  # the same day again: the expiry stayed
    await store.append(TENANT, 42, DAY + 1, [(user, member(42))])
    assert abs(await redis.ttl(key) - store.index_ttl_s) <= 2  # a new day: a new expiry


async def test_an_index_of_the_old_layout_is_moved_on_the_first_read(box):
    redis, store, user = box
    old, key = legacy_days_key(TENANT, user), days_key(TENANT, user)
    await redis.hset(old, mapping={str(DAY - 1): 9, str(DAY): 30, "trim": 4})
    await redis.expire(old, store.index_ttl_s + 5_000)
    await store.append(TENANT, 20, DAY, [(user, member(20))])  # written after the upgrade, lower
    await store.append(TENANT, 50, DAY + 1, [(user, member(50))])
    kept = await store.trim_and_days(TENANT, user, DAY * DAY_MS + 1)  # nothing is past retention
    assert kept.known and kept.days == [DAY - 1, DAY, DAY + 1] and kept.trim == 4
    assert await redis.exists(old) == 0
    assert {m: int(s) for m, s in await redis.zrange(key, 0, -1, withscores=True)} == {
        str(DAY - 1).encode(): 9, str(DAY).encode(): 30, str(DAY + 1).encode(): 50, b"trim": 4}
    assert await redis.ttl(key) > store.index_ttl_s + 4_000  # the later of the two expiries
    past = await store.trim_and_days(TENANT, user, (DAY + 1) * DAY_MS + store.retention_ms + 1)
    assert past.days == [DAY + 1] and past.trim == 30  # the moved days trim like the others
