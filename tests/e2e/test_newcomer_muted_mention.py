"""A newcomer mutes a chat in qim-desktop, moves to another, and is then mentioned in
the muted one: its list row shows "🔕@" at once, as docs/desktop.md promises ("a mention
of you still shows @"). Before, the SDK took `mentioned` only from the server's list
entries, so a mention arriving live showed "🔕 (1)" without "@" until the next list pull
(a reconnect); a plain message still sets no "@" (docs/decisions/0122)."""

from __future__ import annotations

from qim.desktop.app import ChatApp
from tests.desktop.pilotkit import enter
from tests.e2e.sdkclient import client, close_all
from tests.sdk.realstack import eventually, users

SIZE = (120, 36)


async def test_a_live_mention_in_a_muted_chat_shows_at_once(stack, tmp_path):
    me, wang, cy = users(3)
    cw, cc = await client(stack, tmp_path, wang, display_name="王五"), await client(stack, tmp_path, cy)
    for c in (cw, cc):
        await c.connect()
    with_wang = (await cw.open_direct(me)).conversation_id
    with_cy = (await cc.open_direct(me)).conversation_id
    await cw.send_text(with_wang, "晚上吃什么")
    await cc.send_text(with_cy, "hi")
    desk = await client(stack, tmp_path, me, 1, name="-desktop", event_queue=True, on_event=None, display_name="小明")
    await desk.connect()
    app = ChatApp(desk, wang)  # opens the chat with 王五
    async with app.run_test(size=SIZE) as pilot:
        await eventually(lambda: len(app.list_ids()) == 2, what="both chats listed", timeout=60)
        await enter(pilot, app, "/mute")
        await eventually(lambda: desk.conversation_state(with_wang).muted(), what="muted", timeout=60)
        await enter(pilot, app, f"/dm {cy}")
        await eventually(lambda: app.current == with_cy, what="the other chat open", timeout=60)
        await cw.send_text(with_wang, "没提到你")
        await eventually(lambda: "没提到你" in app.list_text(), what="plain message listed", timeout=60)
        assert not desk.conversation_state(with_wang).mentioned, app.list_text()
        await cw.send(with_wang, "@小明 在吗".encode(), mentions=[me])
        await eventually(lambda: "@小明 在吗" in app.list_text(), what="mention listed", timeout=60)
        await eventually(lambda: "🔕@" in app.list_text(), what='"🔕@" on the muted row', timeout=30)
        assert desk.conversation_state(with_wang).mentioned
    await close_all(cw, cc, desk)
