"""Slash commands of qim-desktop's composer (parsed here, run by the app).

    /dm USER            open the direct chat with USER (a user id)
    /group USER...      create a group of you and the users (a new random group id)
    /leave              leave the open group
    /members            list the open group's members
    /recall [SEQ]       recall your message #SEQ of the open chat (default: your latest)
    /older              load older messages of the open chat (also Ctrl+U)
    /read               mark the open chat read
    /help               this list
    /quit               exit (also Ctrl+Q)

Anything else is sent as a message to the open chat; '//' at the start sends a text
that begins with '/'.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from qim.consts import U63_MAX

HELP = __doc__.split("\n\n")[1]
NAMES = ("dm", "group", "leave", "members", "recall", "older", "read", "help", "quit")


class Command(NamedTuple):
    """A parsed slash command: its name and its numeric arguments."""
    name: str
    ids: tuple[int, ...]


class CommandError(ValueError):
    """A command typed wrong; the message is shown to the person."""


def _ids(words: list[str]) -> tuple[int, ...]:
    out = []
    for w in words:
        if not w.isdigit() or not 0 < int(w) <= U63_MAX:
            raise CommandError(f"not a user id or number: {w!r}")
        out.append(int(w))
    return tuple(out)


def parse(text: str) -> tuple[Optional[Command], str]:
    """(command, "") for a slash command, (None, text to send) otherwise.
    CommandError for an unknown command or bad arguments."""
    stripped = text.strip()
    if stripped.startswith("//"):
        return None, text.lstrip()[1:]
    if not stripped.startswith("/"):
        return None, text
    name, *words = stripped[1:].split()
    if name not in NAMES:
        raise CommandError(f"unknown command /{name} (see /help)")
    ids = _ids(words)
    if name == "dm" and len(ids) != 1:
        raise CommandError("usage: /dm USER")
    if name == "group" and not ids:
        raise CommandError("usage: /group USER [USER...]")
    if name == "recall" and len(ids) > 1:
        raise CommandError("usage: /recall [SEQ]")
    if name in ("leave", "members", "older", "read", "help", "quit") and ids:
        raise CommandError(f"/{name} takes no arguments")
    return Command(name, ids), ""
