"""qim-desktop gives a text the send policy refused back to the person (qim/desktop/refused.py,
docs/desktop.md "Commands"): into the composer when it is empty, else through /edit; the
reason stays on the failed row and the notice line; nothing is sent again by itself; a
held send (transient) is still retried and sent.

A real stack with the test send policy (tests/policy/switch.py: b"spam" is refused,
b"once-held" held once then accepted, b"switch" answered from a file) and Textual's pilot
at 80x24; what the person reads is taken from the screen's widgets.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from qim.desktop.app import ChatApp
from qim.desktop.widgets import Composer
from tests.desktop.pilotkit import enter
from tests.e2e.sdkclient import client, close_all
from tests.policy.switchstack import policy_stack_of, switch_file
from tests.sdk.realstack import eventually, users

SMALL = (80, 24)
REASON = "POLICY_REFUSED: spam is not welcome here"


@pytest.fixture(scope="module")
def switch(tmp_path_factory) -> Path:
    """The file steering tests.policy.switch for sends with b"switch" in the body."""
    return switch_file(tmp_path_factory)


@pytest.fixture(scope="module")
def policy_stack(tmp_path_factory, switch):
    """A stack whose writer loads the test policy (tests/policy/switchstack.py)."""
    with policy_stack_of(tmp_path_factory, switch) as st:
        yield st


async def test_a_refused_text_goes_back_into_the_empty_composer_with_its_reason(policy_stack, tmp_path):
    a, b = users(2)
    app = ChatApp(await client(policy_stack, tmp_path, a, name="-desktop", event_queue=True, on_event=None), b)
    await app.client.connect()
    async with app.run_test(size=SMALL) as pilot:
        await eventually(lambda: app.current is not None, what="the chat with b open")
        composer = app.query_one(Composer)
        text = "买 spam 便宜\n第二行"  # Chinese and two lines come back as typed
        await enter(pilot, app, text)
        await eventually(lambda: composer.text == text, what="the refused text back in the composer")
        assert REASON in app.notice_text() and "back in the composer" in app.notice_text()
        await eventually(lambda: f"(failed: {REASON})" in app.transcript_text(), what="the reason on the row")
        # accepted sends pass, and nothing of the refused one is sent again by itself
        composer.clear()
        await enter(pilot, app, "once-held then fine")  # held once (transient): retried, then sent
        await eventually(
            lambda: (
                "once-held then fine (sending…)" not in app.transcript_text()
                and "once-held then fine" in app.transcript_text()
            ),
            what="the held send sent",
        )
        assert composer.text == ""
        unsent = await app.client.unsent(app.current)
        assert [(p.body.decode(), p.state) for p in unsent if p.state == "failed"] == [(text, "failed")]
        await pilot.press("ctrl+q")
    await close_all(app.client)


async def test_a_refusal_arriving_while_typing_is_offered_by_edit(policy_stack, switch, tmp_path):
    a, b = users(2)
    app = ChatApp(await client(policy_stack, tmp_path, a, name="-desktop", event_queue=True, on_event=None), b)
    await app.client.connect()
    switch.write_text("hold")  # the policy holds it (retried by the SDK) while the person types on
    try:
        async with app.run_test(size=SMALL) as pilot:
            await eventually(lambda: app.current is not None, what="the chat with b open")
            composer = app.query_one(Composer)
            await enter(pilot, app, "switch 你好")
            await eventually(lambda: "switch 你好 (sending…)" in app.transcript_text(), what="the send held")
            composer.insert("a new draft")
            switch.write_text("refuse:not today")
            await eventually(lambda: "/edit puts its text back" in app.notice_text(), what="the refusal")
            assert "POLICY_REFUSED: not today" in app.notice_text()
            assert composer.text == "a new draft", "what was typed since is left alone"
            # the row is redrawn after the notice line: wait for it (a busy machine)
            await eventually(lambda: "(failed: POLICY_REFUSED: not today · /edit)" in app.transcript_text(),
                             what="the row offering /edit")
            await enter(pilot, app, "/edit")
            await eventually(lambda: composer.text == "switch 你好", what="/edit put it back")
            await eventually(lambda: "(failed: POLICY_REFUSED: not today)" in app.transcript_text(),
                             what="the row without /edit")
            await enter(pilot, app, "/edit")
            await eventually(lambda: "no refused message to edit" in app.notice_text(), what="nothing left")
            await pilot.press("ctrl+q")
    finally:
        switch.write_text("accept")
    await close_all(app.client)
