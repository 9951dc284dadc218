"""A RoomWriter SIGKILL end to end (docs/decisions/0045-rooms-phase-one-in-process-ring.md):
the ring is lost with the process, so the restarted RoomWriter starts a new room_epoch;
the gateways tell every member to join again, the SDK re-joins by itself, the app is
told the replay is truncated (never a silent gap), and no post is shown twice, a post
retried across the crash included."""

from __future__ import annotations

import asyncio

from tests.e2e.roomkit import in_order_once, member, posts, room_id, told, until
from tests.e2e.sdkclient import close_all
from tests.e2e.test_groups import users


async def test_roomwriter_sigkill_new_epoch_rejoin_truncated_nothing_twice(stack, tmp_path):
    room = room_id()
    ua, ub = users(2)
    a, b = await member(stack, tmp_path, ua), await member(stack, tmp_path, ub)
    loop = asyncio.get_running_loop()
    try:
        first = await a.join_room(room)
        await b.join_room(room)
        await a.send_room(room, "before the crash")
        await until(lambda: posts(b, room) == [b"before the crash"], what="the first post")

        await loop.run_in_executor(None, stack.kill_service, "room")
        during = asyncio.ensure_future(a.send_room(room, "during the outage", timeout=60))  # retried, one cmid
        await asyncio.sleep(0.5)
        await loop.run_in_executor(None, stack.start_service, "room")
        await loop.run_in_executor(None, stack.wait_ready, ["room"])

        ack = await during
        assert ack.room_epoch != first.room_epoch  # the ring died with the process: a new epoch
        await until(lambda: b.rooms.info(room) is not None and b.rooms.info(room).room_epoch == ack.room_epoch,
                    timeout=60, what="b joined the new epoch")
        await a.send_room(room, "after the crash")
        for c in (a, b):
            await until(lambda c=c: posts(c, room) == [b"before the crash", b"during the outage", b"after the crash"],
                        timeout=30, what="every post once, in order")
            in_order_once(c, room)
            # the re-join into another epoch is told as truncated: what happened between is unknown
            assert any(e.truncated for e in told(c, room)), "the new epoch's replay was not marked truncated"
            assert c.rooms.info(room).room_epoch == ack.room_epoch
    finally:
        if not stack.alive("room"):
            await loop.run_in_executor(None, stack.start_service, "room")
            await loop.run_in_executor(None, stack.wait_ready, ["room"])
        await close_all(a, b)
