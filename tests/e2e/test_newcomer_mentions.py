"""A newcomer mentions a Chinese-named friend in qim-desktop the way Chinese is typed:
no space after the name ("@张三你好") or a full-width comma right after it ("@张三，明天见").
Both reach the friend as a mention of them (docs/decisions/0120); before, the whole
run after `@` up to the next space had to equal the name, so neither was a mention and
the muted friend's list never showed "@". A Latin name still needs its end: "@Bobby"
does not mention "Bob"."""

from __future__ import annotations

from qim.desktop.app import ChatApp
from qim.sdk import events as ev
from tests.desktop.pilotkit import enter
from tests.e2e.sdkclient import client, close_all
from tests.sdk.realstack import eventually, users

SIZE = (120, 36)


def _added(c) -> list:
    return [m for e in c.told.events if isinstance(e, ev.MessagesAdded) for m in e.messages]


def _mentions_of(c, body: bytes) -> tuple:
    return next((m.mentions for m in _added(c) if m.body == body), None)


async def test_chinese_name_mentions_without_a_space(stack, tmp_path):
    me, zhang = users(2)
    cz = await client(stack, tmp_path, zhang, display_name="张三")
    await cz.connect()
    chat = (await cz.open_direct(me)).conversation_id
    await cz.send_text(chat, "在吗？")
    desk = await client(stack, tmp_path, me, 1, name="-desktop", event_queue=True, on_event=None)
    await desk.connect()
    app = ChatApp(desk, zhang)  # opens the chat with 张三
    async with app.run_test(size=SIZE) as pilot:
        await eventually(lambda: "在吗？" in app.transcript_text(), what="张三's message shown")
        await app.learn_names([zhang])
        await eventually(lambda: app.names.get(zhang) == "张三", what="张三's display name known")
        sent = ["@张三，明天见", "@张三你好", "/reply 好的 @张三。"]
        for text in sent:
            await enter(pilot, app, text)
        bodies = ["@张三，明天见".encode(), "@张三你好".encode(), "好的 @张三。".encode()]
        for body in bodies:
            await eventually(
                lambda body=body: _mentions_of(cz, body) is not None, what=f"{body.decode()} reached 张三", timeout=60
            )
            assert _mentions_of(cz, body) == (zhang,), body.decode()
        # "@allx" is neither @all nor anyone known: no mention at all
        await enter(pilot, app, "@allx 不是所有人")
        await eventually(
            lambda: _mentions_of(cz, "@allx 不是所有人".encode()) is not None, what="@allx reached", timeout=60
        )
        assert _mentions_of(cz, "@allx 不是所有人".encode()) == ()
        assert not next(m for m in _added(cz) if m.body == "@allx 不是所有人".encode()).mention_all
    await close_all(cz, desk)
