"""The conformance suite against qim.sdk (docs/sdk.md "Conformance suite", decision 0107):
every scenario file of tests/conformance/scenarios/ played by the scripted server
(player.py) while this runner does the app's steps on a real qim.sdk.Client (its
SQLite store in tmp_path). web/test/conformance.test.ts plays the same files against
qim-js. The neutral vocabulary maps to qim.sdk here: EVENT_TYPES below.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Coroutine

import pytest

from qim._core import ids
from qim.errors import ErrorCode
from qim.sdk import Client, direct_conversation
from qim.sdk import events as ev
from qim.sdk.room_events import RoomEventsAdded
from qim.wire.devtoken import issue_dev_token
from qim.wire.tokens import SigningKey
from tests.conformance.player import Player, ScriptFailed
from tests.conformance.script import load, paths

USER, DEVICE = 1001, 1
TELL_TIMEOUT_S = 15.0  # generous for a busy machine; a correct SDK tells in milliseconds
EVENT_TYPES = {  # neutral event -> qim.sdk event class (script.py EVENTS)
    "state": ev.ConnectionState, "message_added": ev.MessagesAdded, "pending_resolved": ev.PendingResolved,
    "send_failed": ev.SendFailed, "kicked": ev.KickedEvent, "cursor_reset": ev.CursorReset,
    "room_events": RoomEventsAdded,
}


def _matches(event: Any, fields: dict) -> bool:
    """The neutral fields of a step against one qim.sdk event."""
    for name, want in fields.items():
        if name == "text":
            items = getattr(event, "messages", None) or getattr(event, "events", None) or ()
            if not any(m.body == want.encode() for m in items):
                return False
        elif name == "conversation_seq":
            if not any(a.conversation_seq == want for a in event.acks):
                return False
        elif getattr(event, name) != want:
            return False
    return True


class AppSide:
    """The app's steps of one scenario on one qim.sdk Client."""

    def __init__(self, client: Client, told: list) -> None:
        self.client = client
        self.told = told
        self.seen = 0  # events before this index were matched by earlier tell steps
        self.started: dict[str, asyncio.Task] = {}

    async def turn(self, i: int, step: dict) -> None:
        """Do step `i` (script.py APP_STEPS). ScriptFailed."""
        kind = next(iter(step))
        await getattr(self, f"_{kind}")(step)

    async def _app(self, step: dict) -> None:
        c, action = self.client, step["app"]
        job: Coroutine[Any, Any, Any]
        if action == "connect":
            job = c.connect()
        elif action == "open_direct":
            await c.open_direct(step["peer"])
            return
        elif action == "send_text":
            job = c.send_text(direct_conversation(0, USER, step["peer"]), step["text"])
        elif action == "leave_group":
            job = c.leave_group(step["group"])
        else:
            job = c.join_room(step["room"])
        self.started[step.get("as", action)] = asyncio.get_running_loop().create_task(job)

    async def _outcome(self, step: dict) -> None:
        task = self.started[step["outcome"]]
        try:
            await asyncio.wait_for(asyncio.shield(task), TELL_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise ScriptFailed("the action did not end in time") from None
        except Exception as exc:  # noqa: BLE001 — compared with what the script says
            if "raises" not in step:
                raise ScriptFailed(f"raised {exc!r}") from None
            names = {k.__name__ for k in type(exc).__mro__}
            if step["raises"] not in names or ("code" in step and getattr(exc, "code", None) != ErrorCode(step["code"])):
                raise ScriptFailed(f"raised {exc!r}, the script says {step['raises']} {step.get('code')}") from None
            return
        if "raises" in step:
            raise ScriptFailed(f"ended without raising {step['raises']}")

    async def _tell(self, step: dict) -> None:
        cls, fields = EVENT_TYPES[step["tell"]], step.get("fields", {})
        end = time.monotonic() + TELL_TIMEOUT_S
        while time.monotonic() < end:
            for j in range(self.seen, len(self.told)):
                if isinstance(self.told[j], cls) and _matches(self.told[j], fields):
                    self.seen = j + 1
                    return
            await asyncio.sleep(0.01)
        raise ScriptFailed(f"not told; told since the last match: {self.told[self.seen:]}")

    async def _query(self, step: dict) -> None:
        conv_id = (ids.conversation_id_group(0, step["group"]) if "group" in step
                   else direct_conversation(0, USER, step["peer"]))
        conv = await self.client.conversation(conv_id)
        have = None if conv is None else conv.unread
        if have != step["unread"]:
            raise ScriptFailed(f"unread is {have}, the script says {step['unread']}")


async def play(scenario: dict, tmp_path: Path) -> None:
    """Play `scenario` against a fresh qim.sdk Client (its store under `tmp_path`). ScriptFailed."""
    key = SigningKey.generate()
    fresh = issue_dev_token(SigningKey.generate(), 0, USER, DEVICE)  # another key: a token unlike the first
    told: list = []

    async def provider() -> str:
        return fresh

    app: AppSide
    player = Player(scenario, "py", lambda i, step: app.turn(i, step))
    port = await player.start()
    client = await Client.open(f"127.0.0.1:{port}", issue_dev_token(key, 0, USER, DEVICE),
                               store_path=str(tmp_path / "store.db"), plaintext=True, event_queue=False,
                               on_event=told.append, token_provider=provider, reconnect_backoff=(0.05, 0.2))
    app = AppSide(client, told)
    try:
        await player.run()
    finally:
        for task in app.started.values():
            task.cancel()
        await client.close()
        await player.stop()


@pytest.mark.parametrize("path", paths(), ids=lambda p: p.stem)
async def test_scenario(path: Path, tmp_path) -> None:
    await play(load(path), tmp_path)
