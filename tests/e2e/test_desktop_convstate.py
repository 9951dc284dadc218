"""qim-desktop's pin, mute and hide and its read ticks, driven with Textual's pilot
against the real stack (issue 37; docs/decisions/0122): what the person reads in the
list (pinned first, 📌 🔕 marks, a hidden chat gone until its next message) and in a
direct chat (✓✓ on own messages the peer read), with SDK clients as the other people
and as the person's other device."""

from __future__ import annotations

from qim.desktop.app import ChatApp
from tests.desktop.pilotkit import enter
from tests.e2e.sdkclient import client, close_all
from tests.sdk.realstack import eventually, users

SIZE = (120, 36)


async def test_pin_mute_hide_and_read_ticks_on_the_screen(stack, tmp_path):
    me, bob, cy = users(3)
    cb, cc = await client(stack, tmp_path, bob), await client(stack, tmp_path, cy)
    phone = await client(stack, tmp_path, me, 2)  # the person's other device
    for c in (cb, cc, phone):
        await c.connect()
    with_bob = (await cb.open_direct(me)).conversation_id
    with_cy = (await cc.open_direct(me)).conversation_id
    await cb.send_text(with_bob, "from bob")
    await cc.send_text(with_cy, "from cy")
    desk = await client(stack, tmp_path, me, 1, name="-desktop", event_queue=True, on_event=None)
    await desk.connect()
    app = ChatApp(desk, bob)  # opens the chat with bob
    async with app.run_test(size=SIZE) as pilot:
        await eventually(lambda: app.list_ids() == [with_cy, with_bob], what="newest first")
        await enter(pilot, app, "/pin")
        await eventually(lambda: app.list_ids() == [with_bob, with_cy], what="pinned first")
        assert "📌" in app.list_text().splitlines()[0]
        await eventually(lambda: phone.conversation_state(with_bob).pinned, what="pin on the other device")
        await enter(pilot, app, "/mute 30")
        await eventually(lambda: "🔕" in app.list_text().splitlines()[0], what="muted mark")
        await eventually(lambda: phone.conversation_state(with_bob).muted(), what="mute on the other device")
        await enter(pilot, app, "/unmute")
        await eventually(lambda: "🔕" not in app.list_text(), what="unmuted")

        # read ticks: my message gets ✓✓ once bob read it
        await enter(pilot, app, "are you there?")
        await eventually(lambda: any(m.body == b"are you there?" for m in cb.told.messages(with_bob)),
                         what="bob has it")
        assert "✓✓" not in app.transcript_text()
        await cb.mark_read(with_bob)
        await eventually(lambda: "are you there? ✓✓" in app.transcript_text(), what="read tick on screen")

        # hide: gone from the list, back with the next message
        await enter(pilot, app, "/hide")
        await eventually(lambda: app.list_ids() == [with_cy], what="hidden from the list")
        await cb.send_text(with_bob, "back")
        await eventually(lambda: app.list_ids() == [with_bob, with_cy], what="back with its next message")

        await enter(pilot, app, "/receipts off")
        await eventually(lambda: "read receipts off" in app.notice_text(), what="receipts off said")
        assert not await desk.read_receipts()
    await close_all(cb, cc, phone, desk)
