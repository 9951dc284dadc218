"""MailboxStore.fused over several consecutive records of a shard (docs/decisions/0067):
the outcome equals the step-wise calls made one record after the other (checked against
begin / append / finish on another shard with the same records), W is written once,
a watermark written by anyone else refuses the call with nothing written, and a
repeated call after a lost reply is recognised."""

from __future__ import annotations

import time

import pytest

from qim._core import mailbox_seq as mseq
from qim.errors import MailboxDirty
from qim.stores.mailboxes import DUPLICATE, FRESH, RECOVERED, FusedRecord, day_of
from tests.stores.conftest import shard_users

TENANT, EPOCH = 7, 1
# a shard's records name its own users (decision 0097: its fused call never crosses instances)
U1, U2 = shard_users(TENANT, 1, 3, 11), shard_users(TENANT, 2, 3, 21)
DAY = day_of(time.time_ns() // 1_000_000) - 1


@pytest.fixture
def stores(mailbox_stores):
    """These vectors run on the CQL MailboxStore too (conftest.py MAILBOX_BACKENDS)."""
    return mailbox_stores


def seq8(offset: int) -> bytes:
    return mseq.to_bytes(mseq.compose(EPOCH, offset))


def records(users: list[int]) -> list[FusedRecord]:
    """Five records: three of a group to `users` (the third on the next day), a repeat of
    the first dispatch (the fanout produced it twice), and a direct one to users[0]."""
    out = []
    for offset, (dispatch, day, to) in enumerate([(b"a", DAY, users), (b"b", DAY, users), (b"c", DAY + 1, users),
                                                   (b"a", DAY, users), (b"d", DAY, users[:1])]):
        out.append(FusedRecord(TENANT, dispatch * 16, dispatch * 32, offset, seq8(offset), day,
                               [(u, seq8(offset) + b"%s-%d" % (dispatch, u)) for u in to]))
    return out


async def step_wise(m, shard: int, recs: list[FusedRecord]) -> list[tuple[str, bytes]]:
    """The oracle: begin, append, finish per record, as the fault-point path does."""
    out, blob = [], None
    for r in recs:
        status, used = await m.begin(shard, r.dispatch_id, r.digest, r.offset, r.seq8)
        if status != DUPLICATE:
            await m.append(r.tenant, r.offset, r.day, [(u, used + e[8:]) for u, e in r.members])
        new = b"W%d" % r.offset
        await m.finish(shard, EPOCH, r.dispatch_id, blob, new)
        blob = new
        out.append((status, used))
    return out


async def mailbox(m, user: int) -> list[tuple[bytes, int]]:
    return await m.read_range(TENANT, user, [DAY, DAY + 1], -1, 1 << 40, 100)


async def test_several_records_in_one_call_equal_the_step_wise_calls(stores):
    m = stores.mailboxes
    fused_users, oracle_users = U1, U2
    got = await m.fused(1, EPOCH, records(fused_users), None, b"W4", writer=b"me")
    want = await step_wise(m, 2, records(oracle_users))
    assert got == want == [(FRESH, seq8(0)), (FRESH, seq8(1)), (FRESH, seq8(2)), (DUPLICATE, seq8(0)),
                           (FRESH, seq8(4))]
    for fu, ou in zip(fused_users, oracle_users):
        rows = [(e.replace(b"-%d" % fu, b"-%d" % ou), o) for e, o in await mailbox(m, fu)]
        assert rows == await mailbox(m, ou)
    assert [o for _, o in await mailbox(m, U1[0])] == [0, 1, 2, 4]  # the repeat appended nothing
    assert [o for _, o in await mailbox(m, U1[1])] == [0, 1, 2]
    assert await m.load_watermark(1) == (b"W4", EPOCH)
    # both days are indexed with their highest offsets (retention reads the index)
    assert (await m.trim_and_days(TENANT, U1[0])).days == [DAY, DAY + 1]


async def test_a_watermark_written_by_another_refuses_the_call_with_nothing_written(stores):
    m = stores.mailboxes
    await m.fused(1, EPOCH, records(U1[:1])[:1], None, b"W0", writer=b"me")
    with pytest.raises(MailboxDirty):  # the call expects no W yet: another owner wrote one
        await m.fused(1, EPOCH, records(U1[:1])[1:3], None, b"W2", writer=b"me")
    assert [o for _, o in await mailbox(m, U1[0])] == [0]
    assert await m.begin(1, b"b" * 16, b"b" * 32, 1, seq8(1)) == (FRESH, seq8(1))  # no DispatchProgress was left


async def test_a_repeated_call_after_a_lost_reply_is_recognised(stores):
    m = stores.mailboxes
    recs = records(U1[:2])
    first = await m.fused(1, EPOCH, recs, None, b"W4", writer=b"me")
    again = await m.fused(1, EPOCH, recs, None, b"W4", writer=b"me")  # the first reply was lost
    assert [s for s, _ in again] == [RECOVERED] * 5
    assert [u for _, u in again] == [u for _, u in first]
    assert [o for _, o in await mailbox(m, U1[0])] == [0, 1, 2, 4]
    with pytest.raises(MailboxDirty):  # the same blob written by another writer is not ours
        await m.fused(1, EPOCH, recs, None, b"W4", writer=b"someone else")


async def test_a_digest_conflict_anywhere_in_the_call_writes_nothing(stores):
    """A script's writes are not undone by a later error: a conflict found at the third
    record must not leave the first two begun, done or appended."""
    m = stores.mailboxes
    recs = records(U1[:1])[:3]
    await m.begin(1, recs[2].dispatch_id, b"another payload".ljust(32), 9, seq8(9))  # stored with another digest
    with pytest.raises(MailboxDirty, match="at offset 2"):
        await m.fused(1, EPOCH, recs, None, b"W2", writer=b"me")
    assert await mailbox(m, U1[0]) == []
    assert await m.begin(1, recs[0].dispatch_id, recs[0].digest, 0, seq8(0)) == (FRESH, seq8(0))
    recs = records(U2[:1])  # shard 2's
    twice = [recs[0], recs[1]._replace(dispatch_id=recs[0].dispatch_id)]  # one dispatch, two payloads, one call
    with pytest.raises(MailboxDirty, match="at offset 1"):
        await m.fused(2, EPOCH, twice, None, b"W1", writer=b"me")
