"""A newcomer recalls her newest message in qim-desktop and then types `/edit TEXT`: the
recalled one cannot be edited, so /edit takes her newest message still there (an older
one). The notice names the message edited, so she sees which one changed; before, it
said only "edited (version 2)" and an older message changed under her without a word of
which (docs/decisions/0120; docs/desktop.md "Commands")."""

from __future__ import annotations

from qim.desktop.app import ChatApp
from qim.sdk import events as ev
from tests.desktop.pilotkit import enter
from tests.e2e.sdkclient import client, close_all
from tests.sdk.realstack import eventually, users

SIZE = (120, 36)


def _updated(c) -> list:
    return [m for e in c.told.events if isinstance(e, ev.MessagesUpdated) for m in e.messages]


async def test_edit_after_recall_names_the_message_edited(stack, tmp_path):
    me, li = users(2)
    cl = await client(stack, tmp_path, li, display_name="李四")
    await cl.connect()
    chat = (await cl.open_direct(me)).conversation_id
    await cl.send_text(chat, "周末爬山？")
    desk = await client(stack, tmp_path, me, 1, name="-desktop", event_queue=True, on_event=None)
    await desk.connect()
    app = ChatApp(desk, li)
    async with app.run_test(size=SIZE) as pilot:
        await eventually(lambda: "周末爬山？" in app.transcript_text(), what="李四's message shown")
        await enter(pilot, app, "好啊，周六")
        await enter(pilot, app, "发错了")
        await eventually(
            lambda: sum(m.sender_id == me for m in app.shown.values()) == 2,
            what="both my messages acknowledged",
            timeout=60,
        )
        await enter(pilot, app, "/recall")
        await eventually(lambda: "recalled" in app.notice_text(), what="recall said", timeout=60)
        await enter(pilot, app, "/edit 好啊，周日")
        await eventually(lambda: "version" in app.notice_text(), what="edit said", timeout=60)
        assert '"好啊，周六"' in app.notice_text(), app.notice_text()
        await eventually(
            lambda: any(m.body == "好啊，周日".encode() and m.edited for m in _updated(cl)),
            what="李四 told the edit",
            timeout=60,
        )
    await close_all(cl, desk)
