"""qim-desktop driven with Textual's test pilot against the real stack: a
person's view — badges, paging back, multi-line Chinese and emoji input, recall, group
creation, connection state across a gateway restart, /quit and being kicked. The other
party is an SDK Client; tests/e2e/test_desktop_tmux.py runs two real processes."""

from __future__ import annotations

import asyncio

from textual import events

from qim.desktop.app import ChatApp, Composer
from tests.e2e.sdkclient import client, close_all
from tests.sdk.realstack import eventually, users

SIZE = (120, 36)


async def desktop(stack, tmp_path, user: int, device: int = 1, peer=None) -> ChatApp:
    c = await client(stack, tmp_path, user, device, name="-desktop", event_queue=True, on_event=None)
    await c.connect()
    return ChatApp(c, peer)


async def test_person_reads_types_chinese_multiline_and_recalls(stack, tmp_path):
    a, b = users(2)
    peer = await client(stack, tmp_path, a)
    await peer.connect()
    conv = (await peer.open_direct(b)).conversation_id
    for text in ["你好！", "今天一起吃饭吗？🍜", "third"]:
        await peer.send_text(conv, text)
    app = await desktop(stack, tmp_path, b)
    async with app.run_test(size=SIZE) as pilot:
        await eventually(lambda: f"user {a} (3)" in app.list_text(), what="badge (3) in the list")
        await pilot.press("shift+tab")  # to the list
        await pilot.press("enter")      # open the highlighted (only) chat
        await eventually(lambda: "今天一起吃饭吗？🍜" in app.transcript_text(), what="messages shown")
        await eventually(lambda: f"user {a} (" not in app.list_text(), what="badge gone once read")
        composer = app.query_one(Composer)
        composer.focus()
        # the pilot presses letters and CJK ideographs; an emoji (like fullwidth punctuation)
        # has no key name, so it comes as a terminal paste does (tmux test: typed for real)
        await pilot.press(*"好的 晚上七点", "ctrl+j", *"see you ")
        app.post_message(events.Paste("👋"))
        await pilot.pause()
        await pilot.press("enter")
        await eventually(lambda: peer.told.messages(conv)[-1:] and
                         peer.told.messages(conv)[-1].body == "好的 晚上七点\nsee you 👋".encode(),
                         what="multi-line Chinese text received by the peer")
        await eventually(lambda: "see you 👋" in app.transcript_text() and "(sending" not in app.transcript_text(),
                         what="own message shown as sent")
        await pilot.press(*"/recall", "enter")
        await eventually(lambda: [m.state for m in peer.store.messages(conv)][-1:] == [1],
                         what="the peer sees the recall")
        await eventually(lambda: "(message recalled)" in app.transcript_text(), what="recalled on screen")
        assert "晚上七点" not in app.transcript_text()
        await pilot.press(*"/quit", "enter")
        await eventually(lambda: not app.is_running, what="app exits on /quit")
    assert app.exit_code == 0
    await close_all(peer, app.client)


async def test_paging_back_through_history_and_creating_a_group(stack, tmp_path):
    a, b, c = users(3)
    peer = await client(stack, tmp_path, a)
    await peer.connect()
    conv = (await peer.open_direct(b)).conversation_id
    cmids = [await peer.send_text(conv, f"msg {i:02d}", wait=False) for i in range(70)]
    await asyncio.gather(*(peer.runtime.wait_ack(x) for x in cmids))
    app = await desktop(stack, tmp_path, b, peer=a)
    await eventually(lambda: app.client.store.run(app.client.store.messages, conv), what="store filled")
    await eventually(lambda: len(app.client.store.messages(conv)) == 70, what="70 stored")
    app.client.store._db.execute("DELETE FROM messages WHERE conversation_id = ? AND body < ?", (conv, b"msg 20"))
    async with app.run_test(size=SIZE) as pilot:
        await eventually(lambda: "msg 69" in app.transcript_text(), what="newest page")
        assert "msg 39" not in app.transcript_text() and "msg 40" in app.transcript_text()
        await pilot.press("ctrl+u")
        await eventually(lambda: "msg 10" in app.transcript_text(), what="second page (history back-fill)")
        await pilot.press("ctrl+u")
        await eventually(lambda: "msg 00" in app.transcript_text() and "beginning" in app.transcript_text(),
                         what="oldest page")
        await pilot.press(*f"/group {a} {c}", "enter")
        await eventually(lambda: app.current and app.convs[app.current].is_group, what="group opened")
        gid = app.convs[app.current].group_id
        assert f"group {gid}" in app.query_one("#title").render().plain
        await eventually(lambda: any(x.group_id == gid for x in peer.store.conversations()),
                         what="the group in the peer's list")
        await pilot.press("ctrl+q")
    await close_all(peer, app.client)


async def test_connection_state_survives_a_gateway_restart_and_kick_exits(stack, tmp_path):
    a, b = users(2)
    peer = await client(stack, tmp_path, a)
    await peer.connect()
    app = await desktop(stack, tmp_path, b, peer=a)
    conv = app.client.direct_id(a)
    async with app.run_test(size=SIZE):
        status = lambda: app.query_one("#status").render().plain  # noqa: E731
        await eventually(lambda: "online" in status(), what="online")
        await asyncio.to_thread(stack.restart_service, "gateway")
        await eventually(lambda: "online" in status() and app.client.runtime.stats["reconnects"] >= 1,
                         timeout=30, what="reconnected after the restart")
        assert "reconnecting" in app.states_seen  # shown while the gateway was away
        await eventually(lambda: peer.connected, timeout=30, what="peer reconnected")
        await peer.open_direct(b)
        await peer.send_text(conv, "after the restart 重启之后")
        await eventually(lambda: "重启之后" in app.transcript_text(), what="message after the restart")
        other = await client(stack, tmp_path, b, 1, name="-desktop2")  # same device logs in elsewhere
        await other.connect()
        await eventually(lambda: not app.is_running, what="kicked app exits")
    assert app.exit_code == 3 and "kicked" in app.exit_message
    await close_all(peer, app.client, other)


async def test_a_peer_who_logs_in_after_the_chat_opened_is_named_without_writing(stack, tmp_path, monkeypatch):
    """The server learns a name at that user's first login. A chat opened before it
    showed the peer's id for good when the peer never wrote (two terminal clients started
    together): the client asks again for a nameless peer (SDK pacing shortened here)."""
    from qim.sdk import names

    monkeypatch.setattr(names, "EMPTY_RETRY_S", 0.3)
    a, b = users(2)
    app = await desktop(stack, tmp_path, b, peer=a)
    async with app.run_test(size=SIZE):
        await eventually(lambda: f"user {a}" in app.list_text(), what="the chat with a nameless peer")
        await asyncio.sleep(0.5)  # asked once already, without an answer
        alice = await client(stack, tmp_path, a, display_name="Alice")
        await alice.connect()  # her session list pull gives the server her name
        await eventually(lambda: "Alice" in app.list_text(), timeout=20, what="the peer's name after her login")
        await app.action_leave_app()
    await close_all(alice, app.client)


async def test_paging_back_in_a_short_chat_keeps_the_newest_message_in_view(stack, tmp_path):
    """Ctrl+U in a chat that fits the pane adds "(beginning of the conversation)" above
    it; the newest message stayed hidden under the composer (the pane was scrolled
    "home" from its bottom-aligned place) with no key to bring it back."""
    a, b = users(2)
    app = await desktop(stack, tmp_path, b, peer=a)
    async with app.run_test(size=SIZE) as pilot:
        await eventually(lambda: app.current is not None, what="the chat open")
        for i in range(3):
            await app.client.send_text(app.current, f"short {i}")
        await eventually(lambda: "short 2" in app.transcript_text(), what="three lines shown")
        await pilot.press("ctrl+u")
        await eventually(lambda: "beginning" in app.transcript_text(), what="the beginning reached")
        await pilot.pause()
        scroll, log = app.query_one("#scroll"), app.query_one("#log")
        # what the pane shows of the transcript, in its lines: [scroll_y, scroll_y + height)
        await eventually(lambda: scroll.scroll_y + scroll.container_size.height >= log.outer_size.height,
                         what="the newest line in view")
        await app.action_leave_app()
    await close_all(app.client)
