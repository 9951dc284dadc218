"""Plain-text forms of what qim-desktop shows (pure functions, tested without a screen).

Bodies are the user's text: they are turned into rich `Text` objects, never parsed as
markup, so "[b]" or "[/]" typed by a person shows as typed. Control messages (group
membership, recalls) are described in words; a recalled message shows as such.
"""

from __future__ import annotations

import time
from typing import Iterable, Optional

from rich.text import Text

from qim.consts import MESSAGE_TYPE_CONTROL, MESSAGE_TYPE_CUSTOM, MESSAGE_TYPE_MEDIA, MESSAGE_TYPE_TEXT
from qim.proto.v1 import message_pb2
from qim.sdk.model import Conversation, LastMessage, PendingSend, StoredMessage
from qim.wire.control import control_event

RECALLED = message_pb2.MESSAGE_STATE_RECALLED
DELETED = message_pb2.MESSAGE_STATE_DELETED
MEMBERSHIP_WORDS = {1: "created the group with", 2: "added", 3: "left", 4: "removed"}
PREVIEW_CHARS = 40


def conversation_name(conv: Conversation) -> str:
    """'user 1002' or 'group 77'."""
    return f"group {conv.group_id}" if conv.is_group else f"user {conv.peer_user_id}"


def badge(conv: Conversation) -> str:
    """Unread badge: '' when nothing is unread, '(3)', or '(200+)' past the exact window."""
    if conv.unread == 0:
        return ""
    return f"({conv.unread}{'' if conv.unread_exact else '+'})"


def who(sender_id: int, me: int) -> str:
    """How a sender is shown: "me" or the user id."""
    return "me" if sender_id == me else str(sender_id)


def describe_control(body: bytes) -> str:
    """Words for a CONTROL message body (a ControlEvent)."""
    event = control_event(body)
    if event is None:
        return "(a group event)"
    if event.HasField("membership"):
        m = event.membership
        actor = f"user {m.actor_user_id}" if m.actor_user_id else "the operator"
        users = ", ".join(str(u) for u in m.users)
        if m.kind == 3:
            return f"{users} left"
        return f"{actor} {MEMBERSHIP_WORDS.get(m.kind, 'changed')} {users}"
    if event.HasField("state_change"):
        return "a message was recalled" if event.state_change.state == RECALLED else "a message was deleted"
    return "(a group event)"


def body_text(message_type: int, custom_type: bytes, body: bytes, state: int) -> str:
    """What a message says, in words for everything that is not plain text."""
    if state == RECALLED:
        return "(message recalled)"
    if state == DELETED:
        return "(message deleted)"
    if message_type == MESSAGE_TYPE_CONTROL:
        return describe_control(body)
    if message_type == MESSAGE_TYPE_TEXT:
        return body.decode("utf-8", errors="replace")
    if message_type == MESSAGE_TYPE_CUSTOM:
        return f"<custom:{custom_type.decode('utf-8', errors='replace')}> {len(body)} bytes"
    if message_type == MESSAGE_TYPE_MEDIA:
        return f"<media> {len(body)} bytes"
    return f"<type {message_type}> {len(body)} bytes"


def preview(last: Optional[LastMessage], me: int) -> str:
    """One line for the list: 'me: 你好…'."""
    if last is None:
        return ""
    text = body_text(last.message_type, last.custom_type, last.body, last.state)
    if last.message_type == MESSAGE_TYPE_TEXT and not last.body_complete and last.state == 0:
        text = "(long message)"
    line = " ".join(text.split())
    if len(line) > PREVIEW_CHARS:
        line = line[:PREVIEW_CHARS - 1] + "…"
    return line if last.message_type == MESSAGE_TYPE_CONTROL else f"{who(last.sender_id, me)}: {line}"


def list_entry(conv: Conversation, me: int, current: bool) -> Text:
    """Two lines of the conversation list: name and badge, then the preview."""
    out = Text()
    out.append("▶ " if current else "  ", style="bold")
    out.append(conversation_name(conv), style="bold" if conv.unread else "")
    if not conv.is_member:
        out.append(" (left)", style="dim")
    mark = badge(conv)
    if mark:
        out.append(f" {mark}", style="bold reverse")
    out.append("\n    " + preview(conv.last_message, me), style="dim")
    return out


def _clock(ms: int) -> str:
    return time.strftime("%H:%M", time.localtime(ms / 1000)) if ms else "--:--"


def message_line(msg: StoredMessage, me: int) -> Text:
    """'12:01 1002 #7: text' (continuation lines of a multi-line text indented)."""
    out = Text()
    out.append(f"{_clock(msg.created_at_ms)} ", style="dim")
    out.append(f"{who(msg.sender_id, me)} ", style="bold cyan" if msg.sender_id == me else "bold")
    out.append(f"#{msg.conversation_seq}: ", style="dim")
    text = body_text(msg.message_type, msg.custom_type, msg.body, msg.state)
    out.append(text.replace("\n", "\n      "), style="italic dim" if msg.state else "")
    return out


def unsent_line(row: PendingSend) -> Text:
    """A send not yet in the store: 'me: text (sending…)' or '(failed)'."""
    out = Text()
    out.append(f"{_clock(row.created_local_ms)} ", style="dim")
    out.append("me ", style="bold cyan")
    out.append(body_text(row.message_type, row.custom_type, row.body, 0).replace("\n", "\n      "))
    mark = {"pending": " (sending…)", "acked": " (sent)", "failed": " (failed)"}.get(row.state, "")
    out.append(mark, style="red" if row.state == "failed" else "dim")
    return out


def transcript(messages: Iterable[StoredMessage], unsent: Iterable[PendingSend], me: int,
               note: str = "") -> Text:
    """The conversation view: an optional note line, messages, then unsent sends."""
    out = Text()
    if note:
        out.append(note + "\n", style="dim")
    lines = [message_line(m, me) for m in messages] + [unsent_line(p) for p in unsent]
    out.append(Text("\n").join(lines) if lines else Text("(no messages yet)", style="dim"))
    return out
