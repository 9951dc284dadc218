"""qim-desktop at 80x24 (the size of a default terminal), driven by Textual's pilot
against the real stack: the newest message is on screen (also below long, wrapped
ones), a new message scrolls into view, and the conversation list holds each
conversation once however its redraws interleave. The screen is read as the person sees
it: the characters Textual composed for the terminal."""

from __future__ import annotations

import asyncio

from qim.desktop.app import ChatApp
from tests.e2e.sdkclient import client, close_all
from tests.sdk.realstack import eventually, users

SMALL = (80, 24)


def screen_text(app: ChatApp) -> str:
    """What the terminal shows: every composed line of the screen, as text."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def test_newest_message_visible_at_80x24_below_wrapped_ones(stack, tmp_path):
    a, b = users(2)
    peer = await client(stack, tmp_path, a)
    await peer.connect()
    conv = (await peer.open_direct(b)).conversation_id
    for i in range(8):  # each wraps over 3 to 4 lines of the 46-column chat pane
        await peer.send_text(conv, f"long {i} " + "这是一条很长的消息 " * 8)
    await peer.send_text(conv, "the last one")
    me = await client(stack, tmp_path, b, name="-desktop", event_queue=True, on_event=None)
    await me.connect()
    app = ChatApp(me, a)
    async with app.run_test(size=SMALL) as pilot:
        await eventually(lambda: "the last one" in app.transcript_text(), what="history loaded")
        await pilot.pause()
        await eventually(lambda: "the last one" in screen_text(app), what="the newest message on screen")
        await peer.send_text(conv, "a new one arrives")
        await eventually(lambda: "a new one arrives" in screen_text(app), what="a new message scrolled into view")
        await peer.send_text(conv, "长" * 120 + " end of a long new one")
        await eventually(lambda: "end of a long new one" in screen_text(app), what="a long new message in view")
        await pilot.press("ctrl+q")
    await close_all(peer, me)


async def test_list_redraws_never_double_an_entry(stack, tmp_path):
    a, b, c = users(3)
    me = await client(stack, tmp_path, a, name="-desktop", event_queue=True, on_event=None)
    await me.connect()
    await me.open_direct(b)
    await me.open_direct(c)
    app = ChatApp(me)
    async with app.run_test(size=SMALL) as pilot:
        await eventually(lambda: len(app.list_ids()) == 2, what="two conversations listed")
        await asyncio.gather(*(app.show_list() for _ in range(4)))  # SDK events and the mount redraw at once
        await pilot.pause()
        assert sorted(app.list_ids()) == sorted([me.direct_id(b), me.direct_id(c)])
        shown = screen_text(app)
        assert shown.count(f"user {b}") == 1 and shown.count(f"user {c}") == 1, shown
        await pilot.press("ctrl+q")
    await close_all(me)
