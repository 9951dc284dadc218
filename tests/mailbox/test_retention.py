"""Mailbox retention from QIM_MAILBOX_RETENTION_MS, exact to the millisecond (issue 10,
fault 9; docs/design.md §5.5; docs/decisions/0013-mailbox-retention-ms.md), on a real Redis.

Entries are written through the real store scripts with chosen created_at values; the
materializer is represented by its shard state. Retention here is a few seconds, so
"expired" entries are a few seconds old and share today's day bucket with fresh ones
(the case a day-granular trim cannot make exact).
Observed before the fix: retention was a constant 7 days counted in whole days, so
entries 10 s old were served with a 2 s setting (there was no setting).
"""

from __future__ import annotations

import os
import random
import time
from types import SimpleNamespace

import pytest

from qim._core import eventgroup, ids, watermark
from qim._core import mailbox_seq as mseq
from qim._core.types import MailboxEvent
from qim.config import Env, MailboxConfig
from qim.consts import DAY_MS, MAILBOX_INDEX_GRACE_MS, MAILBOX_RETENTION_MS_DEFAULT
from qim.errors import ConfigError, ErrorCode, RequestError
from qim.infra.redis.client import connect
from qim.proto.v1 import internal_pb2, mailbox_pb2
from qim.protocol import EventType
from qim.services.mailbox.pull import MailboxPuller
from qim.stores.mailboxes import day_of
from qim.stores.redis.keys import days_key
from qim.stores.redis.mailboxes import RedisMailboxStore
from qim.stores.redis.messages import RedisMessageStore

SHARDS = 8
RETENTION_MS = 2_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.fixture
async def mbx(engines):
    redis = connect(engines.redis_addr)
    store = RedisMailboxStore(redis, RETENTION_MS)
    messages = RedisMessageStore(redis)
    user = random.getrandbits(40) + 1
    lane, _, shard = ids.user_placement(0, user, SHARDS)
    state = SimpleNamespace(epoch=1, dirty="", blob=watermark.empty())
    s = SimpleNamespace(redis=redis, store=store, user=user, state=state, next_offset=0,
                        puller=MailboxPuller(messages, store, SimpleNamespace(shards={shard: state}), SHARDS))
    yield s
    await redis.aclose()


async def put(s, created_at_ms: int, body: bytes = b"") -> int:
    """Append one entry at the next offset; returns its mailbox_seq."""
    offset = s.next_offset
    s.next_offset += 1
    seq = mseq.compose(1, offset)
    ev = MailboxEvent(EventType.MESSAGE, os.urandom(16), os.urandom(16), ids.conversation_id_direct(0, s.user, s.user + 1),
                      offset + 1, s.user + 1, created_at_ms, 1, b"", b"", body or f"m{offset}".encode())
    await s.store.append(0, offset, day_of(created_at_ms), [(s.user, mseq.to_bytes(seq) + eventgroup.pack_group([ev]))])
    s.state.blob = watermark.advance_all(s.state.blob, offset)
    return seq


async def pull(s, cursor: int = 0, **kw) -> mailbox_pb2.MailboxBatch:
    actor = internal_pb2.Actor(tenant_id=bytes(16), user_id=s.user, device_id=1)
    req = internal_pb2.MailboxPull(actor=actor, upstream=mailbox_pb2.PullMailbox(cursor=cursor, **kw).SerializeToString())
    return await s.puller.pull(req)


async def expired_cursor(s, cursor: int) -> bool:
    with pytest.raises(RequestError) as exc:
        await pull(s, cursor)
    return exc.value.code == ErrorCode.CURSOR_EXPIRED


def fresh_day_ok() -> None:
    """Keep 'a few seconds ago' inside today's bucket (not across UTC midnight)."""
    if now_ms() % DAY_MS < 60_000:
        time.sleep(61 - (now_ms() % DAY_MS) / 1000)


async def test_entries_older_than_the_retention_are_not_served_within_todays_bucket(mbx):
    fresh_day_ok()
    old = [await put(mbx, now_ms() - 10_000) for _ in range(3)]
    new = [await put(mbx, now_ms()) for _ in range(2)]
    batch = await pull(mbx)  # a zero cursor reads what is retained
    assert [e.mailbox_seq for e in batch.entries] == new and batch.next_cursor == new[-1] and not batch.has_more
    assert await expired_cursor(mbx, old[0])  # a device that never got old[1], old[2]
    assert [e.mailbox_seq for e in (await pull(mbx, old[-1])).entries] == new  # it had them all
    trim = int(await mbx.redis.zscore(days_key(0, mbx.user), "trim"))
    assert trim == mseq.split(old[-1])[1]  # the boundary is persisted; the rows are gone
    assert await mbx.redis.zcard(f"qim:mbx:{0:032x}:{mbx.user}:d{day_of(now_ms())}") == 2


async def test_an_entry_that_expires_after_a_device_pulled_expires_that_cursor(mbx):
    fresh_day_ok()
    first = await put(mbx, now_ms())
    second = await put(mbx, now_ms())
    batch = await pull(mbx, max_entries=1)
    assert [e.mailbox_seq for e in batch.entries] == [first]
    time.sleep(RETENTION_MS / 1000 + 0.2)
    third = await put(mbx, now_ms())
    assert await expired_cursor(mbx, first)  # `second` expired before this device got it
    assert [e.mailbox_seq for e in (await pull(mbx, second)).entries] == [third]
    assert [e.mailbox_seq for e in (await pull(mbx)).entries] == [third]


async def test_whole_expired_days_are_trimmed_and_a_zero_cursor_still_reads_the_rest(mbx):
    fresh_day_ok()
    before = await put(mbx, now_ms())
    await put(mbx, now_ms() - 3 * DAY_MS)  # a late record of an old day, after `before`
    after = await put(mbx, now_ms())
    assert [e.mailbox_seq for e in (await pull(mbx)).entries] == [before, after]
    assert await expired_cursor(mbx, before)
    assert list((await pull(mbx, after)).entries) == []


async def test_a_zero_cursor_gets_past_many_expired_entries_without_cursor_expired(mbx):
    fresh_day_ok()
    for _ in range(600):  # more than two pages (256 entries) of expired entries first
        await put(mbx, now_ms() - 10_000)
    new = [await put(mbx, now_ms()) for _ in range(3)]
    got, cursor, pulls = [], 0, 0
    while True:
        batch = await pull(mbx, cursor, max_entries=100)
        pulls += 1
        got += [e.mailbox_seq for e in batch.entries]
        cursor = batch.next_cursor
        if not batch.has_more:
            break
    assert got == new and pulls <= 3


async def test_bucket_and_index_expiry_follow_the_retention():
    no_redis = SimpleNamespace(register_script=lambda source: None)
    store = RedisMailboxStore(no_redis, RETENTION_MS)
    day = 20_000
    assert store.expire_at(day) == ((day + 1) * DAY_MS + RETENTION_MS) // 1000
    assert store.index_ttl_s == (RETENTION_MS + DAY_MS + MAILBOX_INDEX_GRACE_MS) // 1000
    default = RedisMailboxStore(no_redis)
    assert default.expire_at(day) == (day + 1 + 7) * 86400  # the old 7-day layout, unchanged


def test_qim_mailbox_retention_ms_is_validated_at_start():
    base = {"QIM_REDIS_ADDR": "127.0.0.1:6379", "QIM_KAFKA_BOOTSTRAP": "127.0.0.1:9092",
            "QIM_INTERNAL_PLAINTEXT_DEV": "1"}
    assert MailboxConfig.from_env(Env(base)).retention_ms == MAILBOX_RETENTION_MS_DEFAULT
    assert MailboxConfig.from_env(Env({**base, "QIM_MAILBOX_RETENTION_MS": "3000"})).retention_ms == 3000
    for bad in ("7d", "999", "-1", str(3651 * DAY_MS)):
        with pytest.raises(ConfigError, match="QIM_MAILBOX_RETENTION_MS"):
            MailboxConfig.from_env(Env({**base, "QIM_MAILBOX_RETENTION_MS": bad}))


async def test_a_mailbox_clock_behind_redis_still_expires_a_cursor_below_what_redis_dropped(mbx, monkeypatch):
    """Day buckets expire by Redis's clock (EXPIREAT); the read path's cutoff must be the
    same clock. Observed before the fix: with this process's clock 3 days behind Redis's,
    a bucket Redis had dropped was read as retained (empty), and a device whose cursor
    was below its entry got the later ones without CURSOR_EXPIRED: a silent gap."""
    fresh_day_ok()
    first = await put(mbx, now_ms())
    await put(mbx, now_ms() - 2 * DAY_MS)  # its day is past the retention: Redis drops the bucket at once
    last = await put(mbx, now_ms())
    real = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real() - 3 * DAY_MS * 1_000_000)  # this host, 3 days behind
    assert await expired_cursor(mbx, first)  # the device never got the dropped entry
    assert [e.mailbox_seq for e in (await pull(mbx)).entries] == [first, last]
