"""qim-desktop's replies, mentions and edits, driven with Textual's pilot against the
real stack (issue 37; docs/decisions/0120): `/reply` shows the server's quote above the
reply and reaches the peer as a reply with its preview, `@na` + Tab completes a name
and the message mentions that person, `/edit TEXT` replaces the person's newest
message (the peer is told the new version; the screen says "(edited)"), and a reply to
a message the peer recalled is quoted as recalled."""

from __future__ import annotations

from qim.desktop.app import ChatApp
from qim.sdk import events as ev
from tests.desktop.pilotkit import enter
from tests.e2e.sdkclient import client, close_all
from tests.sdk.realstack import eventually, users

SIZE = (120, 36)


def _told(c, kind) -> list:
    return [m for e in c.told.events if isinstance(e, kind) for m in e.messages]


async def test_reply_mention_completion_and_edit_on_the_screen(stack, tmp_path):
    me, bob = users(2)
    cb = await client(stack, tmp_path, bob, display_name="Bobby")
    await cb.connect()
    with_bob = (await cb.open_direct(me)).conversation_id
    question = await cb.send_text(with_bob, "Lunch at noon?")
    desk = await client(stack, tmp_path, me, 1, name="-desktop", event_queue=True, on_event=None)
    await desk.connect()
    app = ChatApp(desk, bob)  # opens the chat with bob
    async with app.run_test(size=SIZE) as pilot:
        await eventually(lambda: "Lunch at noon?" in app.transcript_text(), what="bob's message shown")
        await enter(pilot, app, "/reply yes, see you")
        await eventually(lambda: any(m.reply is not None for m in _told(cb, ev.MessagesAdded)), what="bob told the reply")
        (got,) = [m for m in _told(cb, ev.MessagesAdded) if m.reply is not None]
        assert got.body == b"yes, see you" and got.reply.message_id == question.message_id
        assert got.reply.preview == "Lunch at noon?"
        await eventually(lambda: "↩ " in app.transcript_text() and "Lunch at noon?\n" in app.transcript_text(),
                         what="the quote above the reply")

        # @ + the start of a name, Tab: completed from the names the chat knows
        await app.learn_names([bob])
        await eventually(lambda: app.names.get(bob) == "Bobby", what="bob's display name known")
        await pilot.click("#composer")
        await pilot.press(*"ok @Bo")
        await pilot.press("tab")
        await eventually(lambda: app.query_one("#composer").text == "ok @Bobby ", what="@Bo completed")
        await pilot.press("enter")
        await eventually(lambda: any(m.mentions == (bob,) for m in _told(cb, ev.MessagesAdded)), what="bob mentioned")

        # /edit replaces my newest message
        await enter(pilot, app, "/edit ok @Bobby, 12:30 then")
        await eventually(lambda: any(m.body == b"ok @Bobby, 12:30 then" and m.edited
                                     for m in _told(cb, ev.MessagesUpdated)), what="bob told the edit")
        await eventually(lambda: "12:30 then (edited)" in app.transcript_text(), what="(edited) on screen")

        # a reply to a message bob recalled is quoted as recalled
        oops = await cb.send_text(with_bob, "wrong chat")
        await eventually(lambda: "wrong chat" in app.transcript_text(), what="bob's second message shown")
        await cb.recall(with_bob, oops.message_id)
        await eventually(lambda: "(message recalled)" in app.transcript_text(), what="recall shown")
        await enter(pilot, app, "/reply np")  # the newest NORMAL one: my edited message
        await enter(pilot, app, "/reply 3 about lunch")
        await eventually(lambda: any(m.body == b"about lunch" for m in _told(cb, ev.MessagesAdded)),
                         what="second reply at bob")
    await close_all(cb, desk)
