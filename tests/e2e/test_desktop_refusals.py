"""qim-desktop refuses every bad command with one line and stays up, keeps what was
typed, answers /help, /older and /read, and says why it is offline ("the
terminal client tried as a new user would"). Textual's pilot at 80x24 against the real
stack; what the person reads is taken from the screen's widgets."""

from __future__ import annotations

import asyncio

from qim.desktop.app import ChatApp, run_app
from qim.desktop.cli import EXIT_CRASH, exit_status
from qim.desktop.widgets import Composer
from qim.sdk import Client
from qim.wire.devtoken import issue_dev_token
from tests.desktop.pilotkit import enter
from tests.e2e.rawclient import sdk_transport
from tests.e2e.sdkclient import client, close_all
from tests.sdk.realstack import eventually, users

SMALL = (80, 24)


async def desktop(stack, tmp_path, user: int, peer=None) -> ChatApp:
    c = await client(stack, tmp_path, user, name="-desktop", event_queue=True, on_event=None)
    await c.connect()
    return ChatApp(c, peer)


async def typed(pilot, app: ChatApp, text: str) -> str:
    """Type `text` and Enter into the composer; the notice line after it."""
    await enter(pilot, app, text)
    await pilot.pause()
    return app.notice_text()


async def test_bad_commands_are_one_line_refusals_and_the_text_stays(stack, tmp_path):
    a, b = users(2)
    app = await desktop(stack, tmp_path, a)
    async with app.run_test(size=SMALL) as pilot:
        composer = app.query_one(Composer)
        for text, words in ((f"/dm {a}", "your own user id"), (f"/group {a}", "at least one other user"),
                            ("/nope", "unknown command /nope"), ("/dm x", "not a user id"),
                            ("/leave", "needs an open chat"), ("hello", "open a chat first"),
                            ("/title " + "名" * 30, "at most 64 bytes")):
            notice = await typed(pilot, app, text)
            assert words in notice and "\n" not in notice.strip(), (text, notice)
            assert composer.text == text, "a refused command keeps what was typed"
            assert app.is_running and app.return_code is None
        assert not any(c.is_group for c in await app.client.conversations()), "no group of one was made"
        help_text = await typed(pilot, app, "/help")
        for usage in ("/dm USER", "/group USER... [NAME]", "/recall [N]", "/title NAME", "Tab", "Enter opens"):
            assert usage in help_text, usage
        assert composer.text == "", "an accepted command clears the composer"
        await typed(pilot, app, f"/dm {b}")
        assert app.current == app.client.direct_id(b)
        assert "nothing older" in await typed(pilot, app, "/older")
        assert "nothing to mark read" in await typed(pilot, app, "/read")
        await pilot.press("ctrl+q")
    assert app.exit_code == 0
    await close_all(app.client)


async def test_typing_in_the_list_goes_to_the_composer_and_an_over_limit_text_stays(stack, tmp_path):
    a, b = users(2)
    peer = await client(stack, tmp_path, b)
    await peer.connect()
    conv = (await peer.open_direct(a)).conversation_id
    await peer.send_text(conv, "hello there")
    app = await desktop(stack, tmp_path, a)
    async with app.run_test(size=SMALL) as pilot:
        await eventually(lambda: len(app.list_ids()) == 1, what="the chat listed")
        await pilot.press("shift+tab")  # the list has the focus
        assert app.focused is app.query_one("#convs")
        await pilot.press("enter")  # opens the highlighted chat, the composer takes the focus
        await eventually(lambda: "hello there" in app.transcript_text(), what="chat open")
        await pilot.press("shift+tab")
        await pilot.press(*"hi 你好")
        composer = app.query_one(Composer)
        assert composer.text == "hi 你好" and app.focused is composer, "typed with the list focused, not lost"
        await pilot.press("enter")
        await eventually(lambda: peer.told.messages(conv)[-1:] and peer.told.messages(conv)[-1].body == "hi 你好".encode(),
                         what="the peer got it")
        assert "marked read" in await typed(pilot, app, "/read")
        app.client.runtime.max_body_bytes = 40  # the limit the gateway announced, lowered for this test
        too_long = "长" * 20  # 60 bytes of UTF-8
        notice = await typed(pilot, app, too_long)
        assert "PAYLOAD_TOO_LARGE" in notice and composer.text == too_long, notice
        assert too_long not in app.transcript_text()
        await pilot.press("ctrl+q")
    await close_all(peer, app.client)


async def test_an_expired_token_is_shown_with_its_reason_and_sends_wait(stack, tmp_path):
    a, b = users(2)
    # a token that runs out in the session; without a provider the reconnect is refused
    token = issue_dev_token(stack.token_key, 0, a, 1, ttl_s=4)
    c = await Client.open(stack.gateway_addr, token, data_dir=str(tmp_path / "exp"), **sdk_transport(stack))
    await c.connect()
    app = ChatApp(c, b)
    async with app.run_test(size=SMALL) as pilot:
        status = lambda: str(app.query_one("#status").render())  # noqa: E731
        await eventually(lambda: "online" in status(), what="online")
        await eventually(lambda: "offline" in status(), timeout=40, what="offline once the token expired")
        assert "token expired" in status() and "token expired" in app.notice_text(), (status(), app.notice_text())
        await typed(pilot, app, "still here?")
        await eventually(lambda: "still here? (not sent yet: offline)" in app.transcript_text(),
                         what="the unsent message says it waits")
        assert app.is_running
        await pilot.press("ctrl+q")
    await c.close()


async def test_a_crash_exits_non_zero(stack, tmp_path):
    a, = users(1)
    c = await client(stack, tmp_path, a, name="-crash", event_queue=True, on_event=None)

    async def broken(limit=None):
        raise RuntimeError("a bug in the app")

    c.conversations = broken  # type: ignore[method-assign]
    app = await asyncio.wait_for(run_app(c, headless=True), 60)
    code, message = exit_status(app)
    assert code == EXIT_CRASH and "internal error" in message
    await c.close()
