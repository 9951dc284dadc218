"""MailboxStore contract (docs/design.md §5.4–5.5; seed 004 §5): begin / append / finish and the
fused path for one record (tests/stores/test_mailboxes_fused.py: several), duplicates and digest conflicts, the watermark
compare-and-set, ranges including offset 0, retention trims and the trim boundary."""

from __future__ import annotations

import time

import pytest

from qim._core import mailbox_seq as mseq
from qim.consts import DAY_MS
from qim.errors import MailboxDirty
from qim.stores.mailboxes import DUPLICATE, FRESH, RESUME, FusedRecord, day_of
from tests.stores.conftest import shard_users

SHARD, EPOCH, TENANT = 3, 1, 7
DAY = day_of(time.time_ns() // 1_000_000) - 1  # yesterday: buckets expire a retention after their day


@pytest.fixture
def stores(mailbox_stores):
    """These vectors run on the CQL MailboxStore too (conftest.py MAILBOX_BACKENDS)."""
    return mailbox_stores


def seq8(offset: int) -> bytes:
    return mseq.to_bytes(mseq.compose(EPOCH, offset))


async def test_step_wise_materialization_duplicate_and_resume(stores):
    m = stores.mailboxes
    assert await m.load_watermark(SHARD) == (None, 1)
    assert await m.begin(SHARD, b"d" * 16, b"g" * 32, 0, seq8(0)) == (FRESH, seq8(0))
    assert await m.begin(SHARD, b"d" * 16, b"g" * 32, 0, seq8(0)) == (RESUME, seq8(0))  # begun, not finished
    await m.append(TENANT, 0, DAY, [(5, seq8(0) + b"e5"), (9, seq8(0) + b"e9")])
    await m.append(TENANT, 0, DAY, [(5, seq8(0) + b"e5")])  # idempotent
    await m.finish(SHARD, EPOCH, b"d" * 16, None, b"W1")
    assert await m.load_watermark(SHARD) == (b"W1", EPOCH)
    # the same dispatch seen again at offset 4 reuses the first mailbox_seq
    assert await m.begin(SHARD, b"d" * 16, b"g" * 32, 4, seq8(4)) == (DUPLICATE, seq8(0))
    with pytest.raises(MailboxDirty):  # same dispatch_id, another payload
        await m.begin(SHARD, b"d" * 16, b"other digest".ljust(32), 5, seq8(5))
    with pytest.raises(MailboxDirty):  # W moved by someone else: two owners
        await m.finish(SHARD, EPOCH, b"d" * 16, b"not what is stored", b"W2")
    rows = await m.read_range(TENANT, 5, [DAY], -1, 10, 10)
    assert rows == [(seq8(0) + b"e5", 0)]  # offset 0 is included for a zero cursor


def rec(dispatch: bytes, digest: bytes, offset: int, seq: bytes, members) -> FusedRecord:
    return FusedRecord(TENANT, dispatch, digest, offset, seq, DAY, members)


async def test_fused_single_recipient(stores):
    m = stores.mailboxes
    [(status, used)] = await m.fused(SHARD, EPOCH, [rec(b"f" * 16, b"h" * 32, 2, seq8(2), [(5, seq8(2) + b"x")])],
                                     None, b"W")
    assert (status, used) == (FRESH, seq8(2))
    again = await m.fused(SHARD, EPOCH, [rec(b"f" * 16, b"h" * 32, 3, seq8(3), [(5, seq8(3) + b"x")])], b"W", b"W'")
    assert again == [(DUPLICATE, seq8(2))]
    assert await m.read_range(TENANT, 5, [DAY], -1, 10, 10) == [(seq8(2) + b"x", 2)]


async def test_fused_many_recipients_and_a_resume_with_the_first_mailbox_seq(stores):
    """One call writes every recipient's entry; a dispatch begun at one mailbox_seq and
    resumed by the fused call at another (a new shard epoch) appends with the first one,
    so the entries equal those the first attempt may have written (idempotent)."""
    m = stores.mailboxes
    users = shard_users(TENANT, SHARD, 3, 11)  # the shard's own users (decision 0097)
    [(status, used)] = await m.fused(SHARD, EPOCH, [rec(b"m" * 16, b"h" * 32, 4, seq8(4),
                                                        [(u, seq8(4) + b"g%d" % u) for u in users])], None, b"W1")
    assert (status, used) == (FRESH, seq8(4))
    for u in users:
        assert await m.read_range(TENANT, u, [DAY], -1, 10, 10) == [(seq8(4) + b"g%d" % u, 4)]
    first = seq8(5)
    assert (await m.begin(SHARD, b"r" * 16, b"k" * 32, 5, first))[0] == FRESH  # begun, never finished
    other = mseq.to_bytes(mseq.compose(EPOCH + 1, 5))
    [(status, used)] = await m.fused(SHARD, EPOCH + 1, [rec(b"r" * 16, b"k" * 32, 5, other,
                                                            [(u, other + b"r%d" % u) for u in users])], b"W1", b"W2")
    assert (status, used) == (RESUME, first)
    for u in users:
        assert await m.read_range(TENANT, u, [DAY], -1, 10, 10) == [(seq8(4) + b"g%d" % u, 4),
                                                                     (first + b"r%d" % u, 5)]


async def test_ranges_merge_days_by_offset_with_limits(stores):
    m = stores.mailboxes
    for offset, day in [(0, DAY), (1, DAY + 1), (2, DAY), (3, DAY + 1), (4, DAY + 1)]:
        await m.append(TENANT, offset, day, [(5, seq8(offset))])
    days = [DAY, DAY + 1]
    assert [o for _, o in await m.read_range(TENANT, 5, days, -1, 10, 10)] == [0, 1, 2, 3, 4]
    assert [o for _, o in await m.read_range(TENANT, 5, days, 0, 3, 10)] == [1, 2, 3]
    assert [o for _, o in await m.read_range(TENANT, 5, days, -1, 10, 2)] == [0, 1]
    assert await m.read_range(TENANT, 5, days, 4, 4, 10) == []
    assert await m.read_range(TENANT, 5, [], -1, 10, 10) == []


async def test_retention_trims_whole_days_and_straddling_entries(stores):
    m = stores.mailboxes
    retention = m.retention_ms
    for offset, day in [(0, DAY), (1, DAY + 1), (2, DAY + 2)]:
        await m.append(TENANT, offset, day, [(5, seq8(offset))])
    now = (DAY + 2) * DAY_MS + retention + DAY_MS // 2  # DAY and DAY+1 are wholly past, DAY+2 straddles
    kept = await m.trim_and_days(TENANT, 5, now)
    assert kept.known and kept.days == [DAY + 2] and kept.trim == 1 and kept.straddles()
    assert await m.read_range(TENANT, 5, [DAY, DAY + 1], -1, 10, 10) == []  # removed for good
    assert await m.trim_entries(TENANT, 5, DAY + 2, [(seq8(2), 2)]) == 2
    assert await m.read_range(TENANT, 5, [DAY + 2], -1, 10, 10) == []
    unknown = await m.trim_and_days(TENANT, 404, now)
    assert (unknown.known, unknown.days, unknown.trim) == (False, [], -1)
    assert day_of(DAY * DAY_MS + 5) == DAY


async def test_a_replayed_lower_offset_does_not_lower_a_days_trim_boundary(stores):
    m = stores.mailboxes
    await m.append(TENANT, 8, DAY, [(6, seq8(8))])
    await m.append(TENANT, 3, DAY, [(6, seq8(3))])  # a replay of an earlier record, after it
    now = (DAY + 1) * DAY_MS + m.retention_ms + 1  # DAY is wholly past
    kept = await m.trim_and_days(TENANT, 6, now)
    assert kept.known and kept.days == [] and kept.trim == 8  # the day's highest offset, not the last


async def test_dispatch_progress_gc(stores):
    """Redis collects DispatchProgress up to an offset; the CQL MailboxStore collects
    nothing (its identity rows expire by a 31-day TTL, decision 0102): 0, every one kept."""
    m = stores.mailboxes
    for n, offset in enumerate((1, 2, 9)):
        await m.begin(SHARD, bytes([n + 1]) * 16, b"g" * 32, offset, seq8(offset))
    if not getattr(m, "collects_dispatch_progress", True):
        assert await m.gc_dispatch_progress(SHARD, 2) == 0
        assert await m.begin(SHARD, b"\1" * 16, b"g" * 32, 1, seq8(1)) == (RESUME, seq8(1))  # kept
        return
    assert await m.gc_dispatch_progress(SHARD, 2) == 2
    assert await m.begin(SHARD, b"\3" * 16, b"g" * 32, 9, seq8(9)) == (RESUME, seq8(9))  # kept
    assert await m.begin(SHARD, b"\1" * 16, b"g" * 32, 1, seq8(1)) == (FRESH, seq8(1))  # collected
