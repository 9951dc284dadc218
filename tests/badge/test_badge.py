"""UserBadgeState on the real stack (issue 39; docs/decisions/0129): a user with two
devices, a direct chat and a group. Messages raise the badge by exactly the countable
ones (the group's creation, a control message, and the user's own sends do not count);
a recall, a read on the other device, a mute (only mentions count then, until a timed
mute ends) and a leave lower it; at every step the stored badge equals the sum the
server's list shows and both devices' qim.sdk `Client.badge`, and its version never
went backwards."""

from __future__ import annotations

import time

from qim.sdk import BadgeChanged
from tests.badge.audit import badge_store, listed_badge, sampled, stored, versions_only_grow
from tests.e2e.sdkclient import client, close_all
from tests.sdk.realstack import eventually, users

SETTLE_S = 60  # the projection and the settler on a busy machine


async def test_badge_follows_the_unread_definition_and_only_versions_up(stack, engines, tmp_path):
    a, b, me = users(3)
    ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
    m1, m2 = await client(stack, tmp_path, me, 1), await client(stack, tmp_path, me, 2)
    for c in (ca, cb, m1, m2):
        await c.connect()
    store = badge_store(engines)

    async def settles_at(n: int, what: str) -> None:
        async def both() -> bool:
            badge, version = await stored(store, me)
            listed = await listed_badge(m1)
            # both devices see it (SESSION_DELTA; qim.sdk Client.badge), the same version
            return badge == n and listed == n and m1.badge == m2.badge == (n, version)

        await eventually(both, timeout=SETTLE_S, what=f"badge {n} ({what})")

    async with sampled(store, me) as seen:
        direct = (await ca.open_direct(me)).conversation_id
        acks = [await ca.send_text(direct, f"d{i}") for i in range(3)]
        await settles_at(3, "three direct messages")
        group = await cb.create_group([me], title="g")  # its creation is a control message
        await cb.send_text(group.conversation_id, "g1")
        await cb.send_text(group.conversation_id, "g2")
        await settles_at(5, "two group messages, the creation not counted")
        await m1.send_text(group.conversation_id, "mine")  # own: marks the group read
        await settles_at(3, "own send reads the group")
        await cb.send_text(group.conversation_id, "g3")
        await settles_at(4, "one more group message")

        await ca.recall(direct, acks[0].message_id)
        await settles_at(3, "a recall")
        await m2.mark_read(direct)  # a read on the other device
        await settles_at(1, "the direct chat read on device 2")

        await m1.mute(group.conversation_id)
        await settles_at(0, "a muted group without a mention")
        await cb.send(group.conversation_id, b"hey", mentions=[me])
        await settles_at(1, "a mention in the muted group")
        await m1.unmute(group.conversation_id)
        await settles_at(2, "unmuted: both unread group messages")
        await m1.mute(group.conversation_id, until_ms=int(time.time() * 1000) + 5000)
        await settles_at(1, "muted for 5 s: the mention counts")
        await settles_at(2, "the mute ended by itself")

        await m2.leave_group(group.group_id)
        await settles_at(0, "the group left")
        await ca.send_text(direct, "after")
        await settles_at(1, "a new direct message")
    assert len(seen) > 10, "the sampler read the badge"
    assert versions_only_grow(seen), f"a version went backwards or a change kept its version: {seen}"
    assert len({v for _, v in seen}) >= 10  # every change got a version of its own
    # the app is told each newer badge once (BadgeChanged), in version order, ending at it
    told = [(e.badge, e.version) for e in m2.told.events if isinstance(e, BadgeChanged)]
    assert len(told) >= 10 and told[-1] == m2.badge
    assert all(v1 < v2 for (_, v1), (_, v2) in zip(told, told[1:])), told
    await close_all(ca, cb, m1, m2)
