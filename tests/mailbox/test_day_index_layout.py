"""The day index's Redis layout (docs/decisions/0064-day-index-sorted-set.md), on a real
Redis: a sorted set whose member per day keeps that day's highest offset (ZADD GT), an
expiry that moves only when a day is new to it, an index of the old HASH layout moved in
place (its days, its boundary and its expiry kept) by the first read or append that
meets it, and a node of the older release failing loudly on the new layout instead of
reading an index that misses days. The behaviour every backend shares is in
tests/stores/test_mailboxes.py."""

from __future__ import annotations

import random
import time

import pytest
from redis.exceptions import ResponseError

from qim._core import mailbox_seq as mseq
from qim.consts import DAY_MS
from qim.infra.redis.client import connect
from qim.stores.mailboxes import day_of
from qim.stores.redis.keys import days_key
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


async def old_layout(redis, key: str, ttl_s: int) -> None:
    """An index as the release before decision 0064 wrote it."""
    await redis.hset(key, mapping={str(DAY - 1): 9, str(DAY): 30, "trim": 4})
    await redis.expire(key, ttl_s)


async def test_an_index_of_the_old_layout_is_moved_in_place_by_the_first_read(box):
    redis, store, user = box
    key = days_key(TENANT, user)
    await old_layout(redis, key, store.index_ttl_s + 5_000)
    kept = await store.trim_and_days(TENANT, user, DAY * DAY_MS + 1)  # nothing is past retention
    assert kept.known and kept.days == [DAY - 1, DAY] and kept.trim == 4
    assert await redis.type(key) == b"zset"
    assert await redis.ttl(key) > store.index_ttl_s + 4_000  # its expiry kept
    past = await store.trim_and_days(TENANT, user, DAY * DAY_MS + store.retention_ms + 1)
    assert past.days == [DAY] and past.trim == 9  # the moved days trim like the others


async def test_an_append_moves_an_old_index_first_and_keeps_the_higher_offset(box):
    redis, store, user = box
    key = days_key(TENANT, user)
    await old_layout(redis, key, store.index_ttl_s + 5_000)
    await store.append(TENANT, 20, DAY, [(user, member(20))])  # lower than the old index's 30 for DAY
    await store.append(TENANT, 50, DAY + 1, [(user, member(50))])
    assert {m: int(s) for m, s in await redis.zrange(key, 0, -1, withscores=True)} == {
        str(DAY - 1).encode(): 9, str(DAY).encode(): 30, str(DAY + 1).encode(): 50, b"trim": 4}
    kept = await store.trim_and_days(TENANT, user, DAY * DAY_MS + 1)
    assert kept.days == [DAY - 1, DAY, DAY + 1] and kept.trim == 4


async def test_a_node_of_the_older_release_fails_on_the_new_layout(box):
    redis, store, user = box
    key = days_key(TENANT, user)
    await store.append(TENANT, 5, DAY, [(user, member(5))])
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await redis.hgetall(key)  # its read: a stalled pull, never an index without today
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await redis.hget(key, str(DAY))  # its append script's first index command
