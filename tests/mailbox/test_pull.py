"""PULL_MAILBOX bounds on a real Redis (docs/design.md §5.5): never past the lane watermark,
offset 0 included for a zero cursor, pages split only at mailbox_seq boundaries, byte
budget with the first entry always returned.

The materializer is represented by its shard state only (what the puller reads); the
entries are written through the real store scripts.
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
from qim.infra.redis.client import connect
from qim.proto.v1 import internal_pb2, mailbox_pb2
from qim.protocol import EventType
from qim.services.mailbox.pull import MailboxPuller
from qim.stores.redis.mailboxes import RedisMailboxStore
from qim.stores.redis.messages import RedisMessageStore

SHARDS = 8


NOW_MS = time.time_ns() // 1_000_000  # entries must be younger than the mailbox retention


def event(user: int, n: int, body: bytes) -> MailboxEvent:
    return MailboxEvent(EventType.MESSAGE, os.urandom(16), os.urandom(16), ids.conversation_id_direct(0, user, user + 1),
                        n, user + 1, NOW_MS + n, 1, b"", b"", body)


@pytest.fixture
async def setup(engines):
    redis = connect(engines.redis_addr)
    store = RedisMailboxStore(redis)
    user = random.getrandbits(40) + 1
    lane, _, shard = ids.user_placement(0, user, SHARDS)
    state = SimpleNamespace(epoch=1, dirty="", blob=watermark.empty())
    mat = SimpleNamespace(shards={shard: state})
    yield SimpleNamespace(redis=redis, store=store, user=user, lane=lane, shard=shard, state=state,
                          puller=MailboxPuller(RedisMessageStore(redis), store, mat, SHARDS))
    await redis.aclose()


async def put(s, offset: int, body: bytes) -> int:
    seq = mseq.compose(1, offset)
    ev = event(s.user, offset, body)
    await s.store.append(0, offset, ev.created_at_ms // 86_400_000,
                         [(s.user, mseq.to_bytes(seq) + eventgroup.pack_group([ev]))])
    return seq


async def pull(s, cursor: int = 0, **kw) -> mailbox_pb2.MailboxBatch:
    actor = internal_pb2.Actor(tenant_id=bytes(16), user_id=s.user, device_id=1)
    req = internal_pb2.MailboxPull(actor=actor, upstream=mailbox_pb2.PullMailbox(cursor=cursor, **kw).SerializeToString())
    return await s.puller.pull(req)


async def test_nothing_past_the_watermark_and_offset_zero_included(setup):
    s = setup
    seqs = [await put(s, off, f"m{off}".encode()) for off in (0, 1, 2)]
    assert list((await pull(s)).entries) == []  # appended, nothing finished: invisible
    s.state.blob = watermark.advance_all(s.state.blob, 1)  # records 0 and 1 finished
    batch = await pull(s)
    assert [e.mailbox_seq for e in batch.entries] == seqs[:2] and not batch.has_more
    assert batch.next_cursor == seqs[1] and batch.lane == s.lane
    assert list((await pull(s, seqs[1])).entries) == []
    s.state.blob = watermark.advance_all(s.state.blob, 2)
    assert [e.body for e in (await pull(s, seqs[1])).entries] == [b"m2"]


async def test_pages_by_count_and_bytes_split_at_seq_boundaries(setup):
    s = setup
    seqs = [await put(s, off, os.urandom(3000)) for off in range(5)]
    s.state.blob = watermark.advance_all(s.state.blob, 4)
    batch = await pull(s, max_entries=2)
    assert [e.mailbox_seq for e in batch.entries] == seqs[:2] and batch.has_more
    batch = await pull(s, batch.next_cursor, max_bytes=1)  # budget below one entry
    assert [e.mailbox_seq for e in batch.entries] == [seqs[2]] and batch.has_more  # first one always
    batch = await pull(s, batch.next_cursor, max_bytes=7000)
    assert [e.mailbox_seq for e in batch.entries] == seqs[3:5] and not batch.has_more


async def expired(s, cursor: int) -> bool:
    from qim.errors import ErrorCode, RequestError

    try:
        await pull(s, cursor)
    except RequestError as exc:
        return exc.code == ErrorCode.CURSOR_EXPIRED
    return False


async def test_a_cursor_of_another_life_or_ahead_is_expired_and_entries_carry_the_current_epoch(setup):
    """docs/decisions/0075, 0076: a cursor ahead of W or of another shard_epoch cannot be
    placed in this mailbox (REBUILD); entries stored before a restore moved the shard to a
    new shard_epoch are served at their offsets in the new life."""
    s = setup
    seqs = [await put(s, off, f"m{off}".encode()) for off in (0, 1)]  # stored under shard_epoch 1
    s.state.blob = watermark.advance_all(s.state.blob, 1)
    assert await expired(s, mseq.compose(1, 2))  # one past W
    assert not await expired(s, seqs[1])
    s.state.epoch = 7  # a restore moved the shard on
    assert await expired(s, seqs[0])  # below W, but of the other life
    batch = await pull(s)
    assert [e.mailbox_seq for e in batch.entries] == [mseq.compose(7, 0), mseq.compose(7, 1)]
    assert batch.next_cursor == mseq.compose(7, 1) and batch.shard_epoch == 7
    assert list((await pull(s, batch.next_cursor)).entries) == []
