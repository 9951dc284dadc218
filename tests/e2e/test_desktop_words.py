"""qim-desktop as a newcomer types into it (issue 34 item 13), Textual's pilot against the
real stack: what quickly typed lines after a chat switch do, and the words the screen
uses for a peer who never signed in, a mistyped command, /members after leaving, a
preview before its chat was opened, and Escape over /help.

A burst is posted as key events without waiting between them (what a terminal delivers
when a person types fast or pastes), so Textual routes each key to the widget focused
when the app reads it, as it does in a real terminal."""

from __future__ import annotations

from textual import events

from qim.desktop.app import ChatApp
from qim.desktop.widgets import Composer
from qim.sdk.identity import open_store, store_path
from tests.e2e.sdkclient import client, close_all
from tests.e2e.test_desktop_cli import a_key_file, closed_port, one_line_error, run
from tests.sdk.realstack import eventually, users

SIZE = (100, 30)


async def desktop(stack, tmp_path, user: int, peer=None, name: str = "") -> ChatApp:
    c = await client(stack, tmp_path, user, name="-desktop", display_name=name, event_queue=True, on_event=None)
    await c.connect()
    return ChatApp(c, peer)


def burst(app: ChatApp, *keys: str) -> None:
    """Keys as a terminal delivers a fast typist's burst: all queued before any is handled."""
    for k in keys:
        if k == "enter":
            app.post_message(events.Key("enter", "\r"))
        elif k == " ":
            app.post_message(events.Key("space", " "))
        else:
            app.post_message(events.Key(k, k))


def bodies(c, conv) -> list[bytes]:
    return [m.body for m in c.told.messages(conv)]


async def test_lines_typed_after_a_refused_switch_never_go_to_the_chat_open_before(stack, tmp_path):
    a, bob, carol = users(3)
    peer = await client(stack, tmp_path, bob)
    await peer.connect()
    to_bob = (await peer.open_direct(a)).conversation_id
    await peer.send_text(to_bob, "hi from bob")
    app = await desktop(stack, tmp_path, a, peer=bob)
    async with app.run_test(size=SIZE) as pilot:
        await eventually(lambda: "hi from bob" in app.transcript_text(), what="Bob's chat open")
        composer = app.query_one(Composer)
        composer.focus()
        await pilot.pause()
        # a mistyped /dm (one's own id is refused) and two quick lines meant for the new chat
        burst(app, *f"/dm {a}", "enter", *"one", "enter", *"two", "enter")
        await eventually(lambda: composer.text == f"/dm {a}\none\ntwo", what="all three lines back in the composer")
        assert "your own user id" in app.notice_text() and "2 lines" in app.notice_text(), app.notice_text()
        assert app.current == app.client.direct_id(bob)
        assert await app.client.unsent(app.current) == [], "nothing queued for Bob"
        assert "one" not in app.transcript_text() and "two" not in app.transcript_text()
        # fixed and sent again: the lines after it go where the person meant
        composer.clear()
        burst(app, *f"/dm {carol}", "enter", *"three", "enter")
        await eventually(lambda: app.current == app.client.direct_id(carol), what="Carol's chat open")
        await eventually(lambda: [m.body for m in app.client.store.messages(app.current)] == [b"three"],
                         what="three stored in Carol's chat")
        assert b"one" not in bodies(peer, to_bob) and b"two" not in bodies(peer, to_bob)
        assert not any(m.body == b"three" for m in app.client.store.messages(to_bob))
        # the same burst with the list focused (its keys reach the list before the focus moves)
        await pilot.press("shift+tab")
        assert app.focused is app.query_one("#convs")
        burst(app, *f"/dm {bob}", "enter", *"four", "enter")
        await eventually(lambda: peer.told.messages(to_bob)[-1:] and peer.told.messages(to_bob)[-1].body == b"four",
                         what="four reaches Bob, the chat the /dm opened")
        assert composer.text == "" and app.current == app.client.direct_id(bob)
        await pilot.press("ctrl+q")
    await close_all(peer, app.client)


async def test_words_for_a_newcomer(stack, tmp_path):
    a, named, never, third = users(4)
    carol = await client(stack, tmp_path, named, display_name="Carol")
    await carol.connect()
    to_a = (await carol.open_direct(a)).conversation_id
    app = await desktop(stack, tmp_path, a, name="Ann")
    async with app.run_test(size=SIZE) as pilot:
        composer = app.query_one(Composer)
        composer.focus()
        # a preview names its sender before the chat was ever opened
        await carol.send_text(to_a, "are you there?")
        await eventually(lambda: f"Carol ({named})" in app.list_text() and "Carol: are you there?" in app.list_text(),
                         what="the new row named")
        assert f"{named}: are you there?" not in app.list_text()
        # a user who never signed in: said, not silent
        await pilot.press(*f"/dm {never}", "enter")
        await eventually(lambda: "has not signed in yet" in app.notice_text(), what="the /dm notice")
        assert "wait for them" in app.notice_text()
        await pilot.press(*f"/dm {named}", "enter")
        await eventually(lambda: f"chat with Carol ({named}) open" in app.notice_text(), what="a named peer")
        # a mistyped command gets the nearest one
        await pilot.press(*"/jion 5", "enter")
        await eventually(lambda: "did you mean /join?" in app.notice_text(), what="the suggestion")
        assert composer.text == "/jion 5"  # kept to be fixed
        composer.clear()
        # Escape closes /help
        await pilot.press(*"/help", "enter")
        await eventually(lambda: "/dm USER" in app.notice_text(), what="help shown")
        await pilot.press("escape")
        await eventually(lambda: "/dm USER" not in app.notice_text(), what="help closed by Escape")
        # /members after leaving a group: words, not a wire code
        await pilot.press(*f"/group {third} Lunch", "enter")
        await eventually(lambda: app.current and app.convs[app.current].is_group, what="group open")
        await pilot.press(*"/leave", "enter")
        await eventually(lambda: "you left" in app.notice_text(), what="left")
        await eventually(lambda: not app.convs[app.current].is_member, what="the list says left")
        await pilot.press(*"/members", "enter")
        await eventually(lambda: "only its members" in app.notice_text(), what="/members refused in words")
        assert "FORBIDDEN" not in app.notice_text()
        await pilot.press("ctrl+q")
    await close_all(carol, app.client)


def test_another_devices_store_names_the_option_for_a_second_device(tmp_path):
    # user 6's store in this data directory belongs to device 1; `--device 2` alone is refused
    # with the way to a second device: its own --data-dir (docs/desktop.md "A second device")
    endpoint = f"127.0.0.1:{closed_port()}"  # refused before any connection is tried
    open_store(store_path(endpoint, 0, 6, str(tmp_path)), 0, 6, 1).close()
    done = run("qim-desktop", "--user", "6", "--device", "2", "--key", a_key_file(tmp_path / "key.pem"),
               "--endpoint", endpoint, "--data-dir", str(tmp_path))
    one_line_error(done, "belongs to device 1", "--device 2", "--data-dir")


async def test_a_group_preview_names_its_sender_when_the_app_starts(stack, tmp_path):
    a, named = users(2)
    carol = await client(stack, tmp_path, named, display_name="Carol")
    await carol.connect()
    group = await carol.create_group([a], title="Lunch")
    await carol.send_text(group.conversation_id, "hi all")
    c = await client(stack, tmp_path, a, name="-desktop", event_queue=True, on_event=None)
    await c.connect()
    await eventually(lambda: any(m.body == b"hi all" for m in c.store.messages(group.conversation_id)),
                     what="the message stored")
    while not c.events.empty():  # told in an earlier run of the app: this run starts from the store
        c.events.get_nowait()
    app = ChatApp(c)
    async with app.run_test(size=SIZE) as pilot:
        await eventually(lambda: "Carol: hi all" in app.list_text(), what="the preview's sender named")
        assert f"{named}: hi all" not in app.list_text()
        await pilot.press("ctrl+q")
    await close_all(carol, c)
