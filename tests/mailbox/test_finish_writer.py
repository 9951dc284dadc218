"""finish_dispatch's writer token on a real Redis (docs/decisions/0024): a repeated finish
or fused call of the same writer whose first call applied is recognised (nothing
written again); the same blob written by another writer, or by no named writer, is
still QIM_WM_CONFLICT (two owners stop the shard)."""

from __future__ import annotations

import random
import time

import pytest

from qim._core import mailbox_seq as mseq
from qim._core import watermark
from qim.errors import MailboxDirty
from qim.infra.redis.client import connect
from qim.stores.mailboxes import DUPLICATE, FRESH, RECOVERED, FusedRecord, day_of
from qim.stores.redis.mailboxes import RedisMailboxStore

TENANT, EPOCH = 7, 1
DAY = day_of(time.time_ns() // 1_000_000)
W0 = watermark.advance_all(watermark.empty(), 0)
W1 = watermark.advance_all(W0, 1)


def seq8(offset: int) -> bytes:
    return mseq.to_bytes(mseq.compose(EPOCH, offset))


@pytest.fixture
async def store(engines):
    client = connect(engines.redis_addr)
    yield RedisMailboxStore(client)
    await client.aclose()


def shard() -> int:
    return random.getrandbits(30) + 1000  # a shard of this test's own on the shared Redis


async def test_a_repeated_finish_of_the_same_writer_is_recognised_and_writes_nothing(store):
    s = shard()
    assert await store.finish(s, EPOCH, b"a" * 16, None, W0, writer=b"node-a")
    assert await store.begin(s, b"b" * 16, b"g" * 32, 1, seq8(1)) == (FRESH, seq8(1))
    assert await store.finish(s, EPOCH, b"b" * 16, W0, W1, writer=b"node-a")  # applied; say its reply was lost
    assert await store.finish(s, EPOCH, b"b" * 16, W0, W1, writer=b"node-a") is False  # the repeat
    assert await store.load_watermark(s) == (W1, EPOCH)
    assert await store.begin(s, b"b" * 16, b"g" * 32, 1, seq8(1)) == (DUPLICATE, seq8(1))  # marked DONE


@pytest.mark.parametrize("writer", [b"node-b", b""])
async def test_the_same_blob_from_another_or_an_unnamed_writer_is_a_conflict(store, writer):
    s = shard()
    assert await store.finish(s, EPOCH, b"a" * 16, None, W0, writer=b"node-a")
    assert await store.finish(s, EPOCH, b"b" * 16, W0, W1, writer=b"node-a")
    with pytest.raises(MailboxDirty, match="QIM_WM_CONFLICT"):
        await store.finish(s, EPOCH, b"b" * 16, W0, W1, writer=writer)
    with pytest.raises(MailboxDirty, match="QIM_WM_CONFLICT"):  # nor a W this writer never wrote
        await store.finish(s, EPOCH, b"c" * 16, W0, watermark.advance_all(W0, 2), writer=b"node-a")


async def test_a_repeated_fused_call_is_recovered_and_appends_once(store):
    s, user = shard(), random.getrandbits(40) + 1

    async def fused(writer: bytes) -> tuple[str, bytes]:
        record = FusedRecord(TENANT, b"f" * 16, b"h" * 32, 0, seq8(0), DAY, [(user, seq8(0) + b"entry")])
        [result] = await store.fused(s, EPOCH, [record], None, W0, writer=writer)
        return result

    assert await fused(b"node-a") == (FRESH, seq8(0))
    assert await fused(b"node-a") == (RECOVERED, seq8(0))  # its reply was lost: the repeat
    with pytest.raises(MailboxDirty, match="QIM_WM_CONFLICT"):
        await fused(b"node-b")
    assert await store.read_range(TENANT, user, [DAY], -1, 10, 10) == [(seq8(0) + b"entry", 0)]
