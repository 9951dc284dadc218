"""What qim-desktop does with a text submitted from the composer (a /command or a
message), in the order the person pressed Enter.

A refusal is one line in the notice area and the text goes back into the composer to be
fixed. Lines the person submitted *after* a refused one (typed quickly, already queued
behind it) are not run either: they go back into the composer after it, in order. A
message typed after `/dm 1003` is meant for 1003; had the /dm been refused it would
otherwise go to the chat open before (docs/desktop.md "Commands").
"""

from __future__ import annotations

from typing import Any

from qim.desktop import actions, commands, replies, rooms
from qim.desktop.widgets import Composer
from qim.errors import QimError

ChatApp = Any  # qim/desktop/app.py's ChatApp (typed loosely: that module imports this one)


class Held:
    """The submissions held back behind a refused one: up to number `until`, put back at
    character `at` of the composer (after the refused text and those held before)."""

    def __init__(self) -> None:
        self.until = 0
        self.at = 0
        self.count = 0


async def submitted(app: ChatApp, event: Composer.Submitted) -> None:
    """Run one submitted text, or hold it back when an earlier one was refused."""
    composer = app.query_one(Composer)
    held: Held = app.held
    if event.number and event.number <= held.until:
        held.at = composer.restore("\n" + event.text, held.at)
        held.count += 1
        lines = f"{held.count} line{'s' if held.count != 1 else ''}"
        app.tell(f"{app.refusal} · the {lines} typed after it were not run either: back in the composer")
        return
    refusal = await _run(app, event.text)
    if refusal is None:
        return
    app.refusal = refusal
    app.tell(refusal)
    if not app.leaving:
        held.until, held.count = composer.submitted, 0  # everything queued behind this one
        held.at = composer.restore(event.text)


async def _run(app: ChatApp, text: str):
    """None when done, else the one-line refusal."""
    try:
        command, body = commands.parse(text)
        if command is None:
            await send(app, body)
        else:
            app.tell("")
            await actions.run(app, command)
        return None
    except (commands.CommandError, actions.Refused) as exc:
        return str(exc)
    except QimError as exc:  # the SDK's typed refusals (SendRefused, ServerError, NotConnected, ...)
        return f"refused: {exc.code.name}: {exc}"
    except ValueError as exc:  # the SDK's bad-argument errors (an id out of range)
        return f"refused: {exc}"


async def send(app: ChatApp, text: str) -> None:
    """Send text to the open chat (pending until acknowledged; never waits for the server)."""
    if app.room is not None:
        await rooms.post(app, text)
        return
    if app.current is None:
        raise actions.Refused("open a chat first: /dm USER, /group USER..., or pick one on the left "
                              "(Tab, ↑ ↓, Enter)")
    conv = app.convs.get(app.current)
    if conv is not None and conv.is_group and not conv.is_member:
        raise actions.Refused("you left this group: you can read it, not write to it")
    users, everyone = replies.mentions_in(text, app.names)  # @name, @all (decision 0120)
    await app.client.send(app.current, text.encode("utf-8"), wait=False, mentions=users, mention_all=everyone)
    app.tell("")
    app.show_chat(scroll_end=True)
