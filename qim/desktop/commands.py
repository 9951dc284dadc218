"""Slash commands of qim-desktop's composer (parsed here, run by qim/desktop/actions.py).

    /dm USER              open the direct chat with USER (another user's id)
    /group USER... [NAME] create a group of you and the users; NAME is its title
    /title NAME           rename the open group (only its owner can)
    /join ROOM            join chatroom ROOM (a number) and show it here
    /leave                leave the room shown, or the open group
    /members              list the open group's members
    /recall [N]           recall your newest message here (N: your N-th newest)
    /reply [N] TEXT       reply to the newest message (N: the N-th newest), quoted
    /edit [TEXT]          TEXT replaces your newest text; bare: a refused text back
    /older                load older messages of the open chat (also Ctrl+U)
    /read                 mark the open chat read
    /pin, /unpin          pin the open chat to the top of the list (every device)
    /mute [MINUTES]       mute the open chat (for ever, or MINUTES); /unmute ends it
    /hide                 hide the open chat from the list until its next message
    /receipts on|off      send and see read receipts (✓✓), or neither
    /react EMOJI [N]      react to the newest message (N: the N-th newest); /unreact too
    /report [N] REASON [TEXT]  report the newest message (N: the N-th newest) to the
                          operator; REASON: spam, abuse, illegal or other
    /attach PATH          send the file at PATH (a photo, voice note or any file)
    /save [N] PATH        save the newest media message (N: the N-th newest) to PATH
    /help                 this list
    /quit                 exit (also Ctrl+Q)

Keys: Tab / Shift+Tab between the list and the composer; in the list ↑ ↓ choose a chat
and Enter opens it; Enter sends, Ctrl+J new line, Ctrl+U older, Escape closes
this list, Ctrl+Q quits.

Anything else is sent as a message to the open chat; '//' at the start sends a text
that begins with '/'; @name (Tab completes it) mentions someone, @all everyone. In /group, the title starts at the first word that is not a
number. A mistake gets a one-line refusal and the typed text stays in the composer.
"""

from __future__ import annotations

import difflib
from typing import NamedTuple, Optional

from qim.consts import U63_MAX
from qim.sdk.reports import REASONS as REPORT_REASONS
from qim.wire.names import check_name

_PARTS = __doc__.split("\n\n")
HELP = _PARTS[1]
KEYS = " ".join(_PARTS[2].split())
NAMES = ("dm", "join", "group", "title", "leave", "members", "recall", "older", "read", "help", "quit", "reply",
         "edit", "pin", "unpin", "mute", "unmute", "hide", "receipts", "react", "unreact",
         "report", "attach", "save")
_BARE = ("leave", "members", "older", "read", "help", "quit", "pin", "unpin", "unmute", "hide")


class Command(NamedTuple):
    """A parsed slash command: its name, its numeric arguments and its text (a title)."""
    name: str
    ids: tuple[int, ...]
    text: str = ""


class CommandError(ValueError):
    """A command typed wrong; the message is shown to the person."""


def _id(word: str) -> int:
    if not word.isdigit() or not 0 < int(word) <= U63_MAX:
        raise CommandError(f"not a user id or number: {word!r}")
    return int(word)


def _title(text: str) -> str:
    try:
        return check_name(text)
    except ValueError as exc:
        raise CommandError(f"not a group title: {exc}") from None


def parse(text: str) -> tuple[Optional[Command], str]:
    """(command, "") for a slash command, (None, text to send) otherwise.
    CommandError for an unknown command or bad arguments (the usage line)."""
    stripped = text.strip()
    if stripped.startswith("//"):
        return None, text.lstrip()[1:]
    if not stripped.startswith("/"):
        return None, text
    name, *words = stripped[1:].split()
    if name not in NAMES:
        near = difflib.get_close_matches(name.lower(), NAMES, n=1, cutoff=0.5)
        hint = f": did you mean /{near[0]}?" if near else ""
        raise CommandError(f"unknown command /{name}{hint} (see /help)")
    if name in _BARE and words:
        raise CommandError(f"/{name} takes no arguments")
    if name == "dm":
        if len(words) != 1:
            raise CommandError("usage: /dm USER (a user id)")
        return Command(name, (_id(words[0]),)), ""
    if name == "join":
        if len(words) != 1:
            raise CommandError("usage: /join ROOM (a room number)")
        return Command(name, (_id(words[0]),)), ""
    if name == "group":
        count = next((i for i, w in enumerate(words) if not w.isdigit()), len(words))
        ids = tuple(dict.fromkeys(_id(w) for w in words[:count]))
        if not ids:
            raise CommandError("usage: /group USER [USER...] [NAME]")
        return Command(name, ids, _title(" ".join(words[count:]))), ""
    if name == "title":
        if not words:
            raise CommandError("usage: /title NAME")
        return Command(name, (), _title(" ".join(words))), ""
    if name == "recall":
        if len(words) > 1:
            raise CommandError("usage: /recall [N]")
        return Command(name, tuple(_id(w) for w in words)), ""
    if name in ("reply", "edit"):  # the text keeps its own spacing and lines
        nth, rest = 1, (stripped[1:].split(None, 1) + [""])[1]
        if name == "reply" and len(words) > 1 and words[0].isdigit():
            nth, rest = _id(words[0]), rest.split(None, 1)[1]
        if name == "reply" and not rest:
            raise CommandError("usage: /reply [N] TEXT")
        return Command(name, (nth,) if name == "reply" else (), rest), ""
    if name == "mute":
        if len(words) > 1:
            raise CommandError("usage: /mute [MINUTES]")
        return Command(name, tuple(_id(w) for w in words)), ""
    if name in ("react", "unreact"):
        if len(words) not in (1, 2):
            raise CommandError(f"usage: /{name} EMOJI [N]")
        return Command(name, tuple(_id(w) for w in words[1:]), words[0]), ""
    if name == "report":  # docs/decisions/0124
        nth = _id(words.pop(0)) if words and words[0].isdigit() else 1
        if not words or words[0] not in REPORT_REASONS:
            raise CommandError("usage: /report [N] REASON [TEXT] (REASON: spam, abuse, illegal or other)")
        return Command(name, (nth,), " ".join(words)), ""
    if name in ("attach", "save"):  # the path keeps its own spacing (qim/desktop/media.py)
        nth, rest = 1, (stripped[1:].split(None, 1) + [""])[1]
        if name == "save" and len(words) > 1 and words[0].isdigit():
            nth, rest = _id(words[0]), rest.split(None, 1)[1]
        if not rest:
            raise CommandError("usage: /attach PATH" if name == "attach" else "usage: /save [N] PATH")
        return Command(name, (nth,) if name == "save" else (), rest), ""
    if name == "receipts":
        if words not in (["on"], ["off"]):
            raise CommandError("usage: /receipts on|off")
        return Command(name, (), words[0]), ""
    return Command(name, ()), ""
