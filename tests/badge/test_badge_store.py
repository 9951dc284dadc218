"""UserBadgeState's store on a real Redis (docs/decisions/0129): a replayed projection
batch only marks again (the settled badge is absolute, never counted twice); a mark made
while a settle was computing survives it; the version moves only with the badge; a
settle under a stale owner_epoch is refused; a timed mute is marked again when it ends;
badges_of reads many users at once."""

from __future__ import annotations

import pytest

from qim.infra.redis.client import connect
from qim.services.session.register import Message as Msg
from qim.services.session.register import from_message, registrations
from qim.stores.errors import NotOwner
from qim.stores.redis.badges import BADGE_DIRTY_KEY, RedisBadgeStore
from qim.stores.redis.keys import session_shard_checkpoint_key
from qim.stores.redis.sessions import RedisSessionStore
from qim.stores.sessions import Registration

T, ME = 0, 42
C1, C2 = bytes([1]) + b"\x01" * 15, bytes([1]) + b"\x02" * 15


@pytest.fixture
async def redis(private_redis):
    client = connect(private_redis.addr)
    await client.hset(session_shard_checkpoint_key(0), "oe", "3")  # the shard's owner_epoch
    yield client
    await client.aclose()


async def test_a_replayed_registration_marks_again_and_the_badge_stays_absolute(redis):
    sessions, badges = RedisSessionStore(redis), RedisBadgeStore(redis)
    regs = [Registration(T, ME, C1, 1000, 0, 7), Registration(T, ME, C2, 1001, 0, 0)]
    await sessions.register(regs)
    marks = await badges.dirty(redis, 100)
    assert {(d.user, d.conversation_id) for d in marks} == {(ME, C1), (ME, C2)}
    assert await badges.settle(0, 3, T, ME, {C1: 2, C2: 3}, marks) == (5, 1, True)
    assert await redis.hlen(BADGE_DIRTY_KEY) == 0
    await sessions.register(regs)  # the same batch replayed after a crash
    again = await badges.dirty(redis, 100)
    assert len(again) == 2
    # recomputed from history: the same absolute values, nothing added, no new version
    assert await badges.settle(0, 3, T, ME, {C1: 2, C2: 3}, again) == (5, 1, False)
    assert (await badges.badges_of(T, [ME]))[ME] == (5, 1)


async def test_a_mark_made_during_a_settle_survives_it_and_versions_follow_the_badge(redis):
    badges = RedisBadgeStore(redis)
    await badges.mark(T, ME, [C1])
    seen = await badges.dirty(redis, 100)
    await badges.mark(T, ME, [C1])  # a MARK_READ lands while the settler computes
    assert await badges.settle(0, 3, T, ME, {C1: 4}, seen) == (4, 1, True)
    left = await badges.dirty(redis, 100)
    assert [d.conversation_id for d in left] == [C1]  # settled again by the next round
    assert await badges.settle(0, 3, T, ME, {C1: 0}, left) == (0, 2, True)  # read: lowered, version up
    assert await redis.hlen(BADGE_DIRTY_KEY) == 0
    assert (await badges.badges_of(T, [ME, 43]))[43] == (0, 0)


async def test_a_settle_under_a_stale_owner_epoch_is_refused_and_writes_nothing(redis):
    badges = RedisBadgeStore(redis)
    await badges.mark(T, ME, [C1])
    seen = await badges.dirty(redis, 100)
    with pytest.raises(NotOwner):
        await badges.settle(0, 2, T, ME, {C1: 9}, seen)
    assert (await badges.badges_of(T, [ME]))[ME] == (0, 0)
    assert await redis.hlen(BADGE_DIRTY_KEY) == 1  # still to be settled by the owner


async def test_a_timed_mute_is_marked_again_when_it_ends(redis):
    badges = RedisBadgeStore(redis)
    await badges.mark(T, ME, [C1])
    seen = await badges.dirty(redis, 100)
    assert (await badges.settle(0, 3, T, ME, {C1: 0}, seen, wakes={C1: 5000}))[0] == 0  # muted until 5000
    assert await badges.wake_due(redis, 4999, 100) == 0 and await redis.hlen(BADGE_DIRTY_KEY) == 0
    assert await badges.wake_due(redis, 5000, 100) == 1  # the mute ended: settled again
    assert [(d.user, d.conversation_id) for d in await badges.dirty(redis, 100)] == [(ME, C1)]
    assert await badges.wake_due(redis, 9999, 100) == 0  # queued once


async def test_a_malformed_mark_or_one_of_user_0_is_dropped_and_counted_not_raised(redis):
    # an operator's delete once registered user 0 and its mark killed every settle round
    badges = RedisBadgeStore(redis)
    await badges.mark(T, ME, [C1])
    await redis.hset(BADGE_DIRTY_KEY, mapping={f"{T:032x}:0:{C1.hex()}": 1, "garbage": 1})
    assert [(d.user, d.conversation_id) for d in await badges.dirty(redis, 100)] == [(ME, C1)]
    assert badges.dropped_marks == 2
    assert await redis.hkeys(BADGE_DIRTY_KEY) == [f"{T:032x}:{ME}:{C1.hex()}".encode()]


def test_an_operator_action_registers_no_session_for_user_0():
    direct = bytes([1]) + b"\x05" * 15
    regs = from_message(T, direct, 9, 1000, 0, [ME, 77], lambda u: True)  # sender 0: an operator
    assert sorted(r.user for r in regs) == [ME, 77]
    assert sorted(r.user for r in registrations([Msg(T, direct, 9, 1000, 0, [ME, 77])], lambda u: True)) == [ME, 77]
