"""The NotificationService's alert claims and badge versions move with the user's
MailboxShard (docs/decisions/0144, 0104), on three real Redis instances (layout of
tests/stores/test_shard_move.py: shard 1 on instance a). A user of shard 1 has an alert
made ("s"), one being made by an attempt ("c..." claim) and a badge version sent; the
shard moves to b. Read through a topology made after the move: the made alert is still
made (a replay of its record makes no second alert), the claim is still the attempt's
(another node waits; the attempt's renew holds), a silent update not newer than the
version sent is still skipped; nothing of them is left on a."""

from __future__ import annotations

from qim.infra.redis.client import connect
from qim.stores.notify import AlertKey
from qim.stores.redis.notify import RedisNotifyStore
from qim.stores.redis.shardmove import move_shard
from qim.stores.redis.topology import topology_of
from tests.stores.conftest import shard_users
from tests.stores.test_topology_archive import layout3

T = 7
M1, M2 = b"\x01" * 16, b"\x02" * 16


async def test_alert_claims_and_badge_versions_move_with_the_users_shard(redis_three):
    a, b, _ = redis_three
    layout = layout3(redis_three)
    (user,) = shard_users(T, 1, 1)
    made, held, fresh = AlertKey(user, 1, M1), AlertKey(user, 2, M1), AlertKey(user, 1, M2)
    before = topology_of(layout)
    try:
        await before.load_placement()
        assert before.user(T, user) is before.clients[a.addr]
        store = RedisNotifyStore(before)
        assert await store.claim(T, [made], 60_000, "cA") == ["new"]
        await store.sent(T, [made])
        assert await store.claim(T, [held], 60_000, "cB") == ["new"]
        assert await store.badge_versions(T, user, [(1, 9, 4)], silent=False) == [(9, 4)]
    finally:
        await before.aclose()
    assert a.client().keys("qim:notify:*")

    lines: list[str] = []
    done = await move_shard(layout, connect, a.addr, 1, b.addr, lines.append, settle_s=0)
    assert done["source"] == a.addr, (done, lines)

    after = topology_of(layout)
    try:
        await after.load_placement()
        assert after.user(T, user) is after.clients[b.addr]
        store = RedisNotifyStore(after)
        assert await store.claim(T, [made, held, fresh], 60_000, "cC") == ["sent", "claimed", "new"]
        assert await store.renew(T, held, "cB", 60_000) is True  # the attempt still holds its alert
        assert await store.renew(T, made, "cA", 60_000) is False  # made: never sent again
        assert await store.badge_versions(T, user, [(1, 9, 4)], silent=True) == [None]  # sent already
    finally:
        await after.aclose()
    assert not a.client().keys("qim:notify:*"), "alert claims left behind on the instance the shard left"
