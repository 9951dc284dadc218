"""qim-desktop's reactions and typing, driven with Textual's pilot against the real stack
(issue 37; decision 0121): /react and /unreact put and take an emoji under the newest
message, another member's reaction appears under it live, the person's typing reaches
the other member and the other member's "typing…" shows in the header until it expires."""

from __future__ import annotations

from textual.widgets import Static

from qim.desktop.app import ChatApp
from qim.desktop.widgets import Composer
from qim.sdk.reactions import ReactionsChanged
from tests.desktop.pilotkit import enter
from tests.e2e.sdkclient import close_all
from tests.reactions.kit import on_gateway, typing_told
from tests.sdk.realstack import eventually, users

SIZE = (120, 36)
EXPIRY_WAIT_S = 40.0


def header(app: ChatApp) -> str:
    """The text above the open chat (its name, and who is typing)."""
    return str(app.query_one("#title", Static).render())


async def test_reactions_under_messages_and_typing_in_the_header(two_gateways, tmp_path):
    st = two_gateways
    me, bob = users(2)
    cb = await on_gateway(st, tmp_path, bob, 2, display_name="Bob")  # on the other gateway
    chat = (await cb.open_direct(me)).conversation_id
    hello = await cb.send_text(chat, "hello there")
    desk = await on_gateway(st, tmp_path, me, 1, name="-desktop", event_queue=True, on_event=None)
    app = ChatApp(desk, bob)  # opens the chat with bob
    async with app.run_test(size=SIZE) as pilot:
        await eventually(lambda: "hello there" in app.transcript_text(), what="the message shown")
        await enter(pilot, app, "/react 👍")
        await eventually(lambda: "[👍 1]" in app.transcript_text(), what="my reaction under the message")
        assert 'reacted 👍 on "hello there"' in app.notice_text()
        await eventually(lambda: [e.emoji for e in cb.told.of(ReactionsChanged)] == ["👍"], what="bob told")
        await cb.reactions.add(chat, hello.message_id, "🎉")
        await eventually(lambda: "🎉 1 [👍 1]" in app.transcript_text(), what="bob's reaction live")  # ties by emoji
        await enter(pilot, app, "/unreact 👍")
        await eventually(lambda: "👍" not in app.transcript_text() and "🎉 1" in app.transcript_text(),
                         what="mine taken away")
        await enter(pilot, app, "/react 👍 9")
        await eventually(lambda: "only 1 message(s) here to react to" in app.notice_text(), what="the refusal")

        composer = app.query_one(Composer)
        composer.clear()  # the refused command stayed in it
        composer.focus()
        await pilot.press("h", "i")  # typing in the composer reaches bob
        await eventually(lambda: typing_told(cb, chat)[:1] == [(me, True)], what="bob sees me typing")
        await cb.reactions.typing(chat)
        await eventually(lambda: f"Bob ({bob}) is typing…" in header(app), what="typing… shown")
        await eventually(lambda: "typing…" not in header(app), timeout=EXPIRY_WAIT_S, what="typing… gone by itself")
    await close_all(cb, desk)
