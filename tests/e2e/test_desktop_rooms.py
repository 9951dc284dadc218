"""qim-desktop in a chatroom, driven with Textual's pilot against the real stack:
/join shows the room with its posts and member count, typed text is posted to it, a
reconnect past the room's ring shows the truncation bar (never a silent gap), /leave
leaves it. The other member is an SDK Client."""

from __future__ import annotations

from qim.desktop import rooms
from qim.desktop.app import ChatApp, Composer
from tests.e2e.roomkit import member, posts, room_id, until
from tests.e2e.sdkclient import client, close_all
from tests.e2e.test_rooms import RING_EVENTS
from tests.sdk.realstack import eventually, users

SIZE = (120, 36)


async def test_desktop_joins_posts_sees_the_truncation_bar_and_leaves(stack, tmp_path):
    a, b = users(2)
    room = room_id()
    peer = await member(stack, tmp_path, a)
    c = await client(stack, tmp_path, b, 1, name="-desktop", event_queue=True, on_event=None)
    await c.connect()
    app = ChatApp(c)
    try:
        await peer.join_room(room)
        await peer.send_room(room, "大家好")
        async with app.run_test(size=SIZE) as pilot:
            app.query_one(Composer).focus()
            await pilot.press(*f"/join {room}", "enter")
            await eventually(lambda: "大家好" in app.transcript_text(), what="the room's recent post shown")
            assert f"room {room} · 2 members" in str(app.query_one("#title").render())
            await pilot.press(*"hello room", "enter")
            await until(lambda: posts(peer, room)[-1:] == [b"hello room"], what="the peer told the desktop's post")
            await eventually(lambda: "hello room" in app.transcript_text(), what="own post shown")
            assert rooms.TRUNCATED_BAR not in app.transcript_text()

            await c.runtime.close()
            for i in range(RING_EVENTS + 5):
                await peer.send_room(room, f"while away {i}")
            await c.runtime.connect()  # the SDK re-joins; the ring no longer holds the gap's start
            await eventually(lambda: f"while away {RING_EVENTS + 4}" in app.transcript_text(), what="replay shown")
            text = app.transcript_text()
            assert rooms.TRUNCATED_BAR in text and text.index(rooms.TRUNCATED_BAR) < text.index("while away")
            assert "while away 0\n" not in text + "\n"  # the oldest are gone: the bar says so

            await pilot.press(*"/leave", "enter")
            await eventually(lambda: f"you left room {room}" in app.notice_text(), what="left notice")
            await until(lambda: peer.rooms.info(room) is not None, what="peer still in")
            await pilot.press(*"/quit", "enter")
            await eventually(lambda: not app.is_running, what="app exits")
    finally:
        await close_all(peer, c)
