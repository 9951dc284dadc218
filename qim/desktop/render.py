"""Plain-text forms of what qim-desktop shows (pure functions, tested without a screen).

Bodies are the user's text: they are turned into rich `Text` objects, never parsed as
markup, so "[b]" or "[/]" typed by a person shows as typed. Control messages (group
membership, titles, recalls) are described in words; a recalled message shows as such.

People and groups are shown by name where one is known (a group's title, a user's
display name: docs/protocol.md "Names"), else by their numeric id; ids stay the keys.
Messages are not numbered: conversation_seq has gaps (CONTROL messages take numbers
too), and a gap is not a lost message (docs/desktop.md).
"""

from __future__ import annotations

import time
from typing import Callable, Iterable, Mapping, Optional

from rich.cells import cell_len
from rich.text import Text

from qim.consts import MESSAGE_TYPE_CONTROL, MESSAGE_TYPE_CUSTOM, MESSAGE_TYPE_MEDIA, MESSAGE_TYPE_TEXT
from qim.proto.v1 import message_pb2
from qim.sdk.model import Conversation, LastMessage, PendingSend, StoredMessage
from qim.wire.control import control_event
from qim.wire.media import BadMediaRef, decode_ref

RECALLED = message_pb2.MESSAGE_STATE_RECALLED
DELETED = message_pb2.MESSAGE_STATE_DELETED
MEDIA_KINDS = {"image": "photo", "video": "video", "audio": "voice note"}  # by the mime's top type; else "file"
MEMBERSHIP_WORDS = {1: "created the group with", 2: "added", 3: "left", 4: "removed"}
LIST_CELLS = 29  # a list row: the 30-column list less its border (qim/desktop/app.py CSS)
PREVIEW_CELLS = LIST_CELLS - 5  # the second line, after its 4-column indent (CJK counts two)
Names = Mapping[int, str]
NO_NAMES: Names = {}
STATE_WORDS = {"ready": "● online", "reconnecting": "○ reconnecting…", "syncing": "◐ syncing…",
               "connecting": "◐ connecting…", "offline": "○ offline", "kicked": "○ kicked"}


def cut(text: str, cells: int) -> str:
    """`text` on one line, at most `cells` terminal cells wide ('…' when cut)."""
    line = " ".join(text.split())
    if cell_len(line) <= cells:
        return line
    out, used = [], 0
    for ch in line:
        used += cell_len(ch)
        if used > cells - 1:
            break
        out.append(ch)
    return "".join(out) + "…"


def person(user_id: int, names: Names = NO_NAMES) -> str:
    """'Alice (1002)' when the user's display name is known, else 'user 1002'."""
    name = names.get(user_id)
    return f"{name} ({user_id})" if name else f"user {user_id}"


def conversation_name(conv: Conversation, names: Names = NO_NAMES) -> str:
    """A group's title or 'group 77'; the peer of a direct chat as `person`."""
    if conv.is_group:
        return conv.title or f"group {conv.group_id}"
    return person(conv.peer_user_id, names)


def badge(conv: Conversation) -> str:
    """Unread badge: '' when nothing is unread, '(3)', or '(200+)' past the exact window."""
    if conv.unread == 0:
        return ""
    return f"({conv.unread}{'' if conv.unread_exact else '+'})"


def who(sender_id: int, me: int, names: Names = NO_NAMES) -> str:
    """How a sender is shown beside a message: "me", the display name, or the user id."""
    return "me" if sender_id == me else (names.get(sender_id) or str(sender_id))


def describe_control(body: bytes, names: Names = NO_NAMES) -> str:
    """Words for a CONTROL message body (a ControlEvent)."""
    event = control_event(body)
    if event is None:
        return "(a group event)"
    if event.HasField("membership"):
        m = event.membership
        actor = (names.get(m.actor_user_id) or f"user {m.actor_user_id}") if m.actor_user_id else "the operator"
        users = ", ".join(names.get(u) or str(u) for u in m.users)
        if m.kind == 3:
            return f"{users} left"
        named = f' "{m.title}"' if m.kind == 1 and m.title else ""
        return f"{actor} {MEMBERSHIP_WORDS.get(m.kind, 'changed')} {users}" + (f", named{named}" if named else "")
    if event.HasField("title_change"):
        t = event.title_change
        actor = (names.get(t.actor_user_id) or f"user {t.actor_user_id}") if t.actor_user_id else "the operator"
        return f'{actor} named the group "{t.title}"' if t.title else f"{actor} removed the group's title"
    if event.HasField("state_change"):
        return "a message was recalled" if event.state_change.state == RECALLED else "a message was deleted"
    return "(a group event)"


def media_words(body: bytes) -> str:
    """A MEDIA message in words: its kind, file name, pixels and size from the reference
    it carries (docs/sdk.md "Media"), e.g. "[photo: beach.jpg, 800×600, 8.0 KiB]"; never
    the reference's bytes (binary: they would show as garbage). "[media]" for an empty
    body (a list head whose body was cut: a large thumbnail)."""
    if not body:
        return "[media]"
    try:
        ref = decode_ref(body)
    except BadMediaRef:
        return "[media: unreadable reference]"
    kind = MEDIA_KINDS.get(ref.mime.split("/")[0], "file")
    parts = [ref.name] if ref.name else []
    if ref.width and ref.height:
        parts.append(f"{ref.width}×{ref.height}")
    if ref.duration_ms:
        parts.append(f"{ref.duration_ms / 1000:.0f} s")
    parts.append(size_words(ref.size))
    return f"[{kind}: {', '.join(parts)}]"


def size_words(size: int) -> str:
    """Bytes as a person reads them: "512 B", "8.0 KiB", "17.0 MiB"."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


def body_text(message_type: int, custom_type: bytes, body: bytes, state: int, names: Names = NO_NAMES) -> str:
    """What a message says, in words for everything that is not plain text."""
    if state == RECALLED:
        return "(message recalled)"
    if state == DELETED:
        return "(message deleted)"
    if message_type == MESSAGE_TYPE_CONTROL:
        return describe_control(body, names)
    if message_type == MESSAGE_TYPE_TEXT:
        return body.decode("utf-8", errors="replace")
    if message_type == MESSAGE_TYPE_CUSTOM:
        return f"<custom:{custom_type.decode('utf-8', errors='replace')}> {len(body)} bytes"
    if message_type == MESSAGE_TYPE_MEDIA:
        return media_words(body)
    return f"<type {message_type}> {len(body)} bytes"


def preview(last: Optional[LastMessage], me: int, names: Names = NO_NAMES, cells: int = PREVIEW_CELLS) -> str:
    """One line for the list, at most `cells` wide: 'me: 你好…'."""
    if last is None:
        return ""
    text = body_text(last.message_type, last.custom_type, last.body, last.state, names)
    if last.message_type == MESSAGE_TYPE_TEXT and not last.body_complete and last.state == 0:
        text = "(long message)"
    elif last.message_type == MESSAGE_TYPE_MEDIA and not last.body_complete and last.state == 0:
        text = "[media]"  # a cut reference does not decode
    if last.message_type != MESSAGE_TYPE_CONTROL:
        text = f"{who(last.sender_id, me, names)}: {text}"
    return cut(text, cells)


def list_entry(conv: Conversation, me: int, current: bool, names: Names = NO_NAMES, marks: str = "") -> Text:
    """Two lines of the conversation list: name, `marks` (pinned, muted, mentioned:
    qim/desktop/marks.py) and badge, then the preview (each one line: a long name or
    preview is cut, never wrapped over the next entry)."""
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append("▶ " if current else "  ", style="bold")
    mark = badge(conv)
    left = " (left)" if not conv.is_member else ""
    room = LIST_CELLS - 3 - (len(mark) + 1 if mark else 0) - len(left) - (cell_len(marks) + 1 if marks else 0)
    out.append(cut(conversation_name(conv, names), room), style="bold" if conv.unread else "")
    if left:
        out.append(left, style="dim")
    if marks:
        out.append(f" {marks}")
    if mark:
        out.append(f" {mark}", style="bold reverse")
    out.append("\n    " + preview(conv.last_message, me, names), style="dim")
    return out


def clock(ms: int) -> str:
    """'HH:MM' local time of unix ms ('--:--' for 0)."""
    return time.strftime("%H:%M", time.localtime(ms / 1000)) if ms else "--:--"


def message_line(msg: StoredMessage, me: int, names: Names = NO_NAMES, read: bool = False) -> Text:
    """'12:01 Alice: text' (continuation lines of a multi-line text indented); `read`:
    one of mine the peer of a direct chat read (' ✓✓')."""
    out = Text()
    out.append(f"{clock(msg.created_at_ms)} ", style="dim")
    out.append(f"{who(msg.sender_id, me, names)}: ", style="bold cyan" if msg.sender_id == me else "bold")
    if msg.reply is not None:  # the server's quote of the replied message (decision 0120)
        said = "(message recalled)" if msg.reply.state else msg.reply.preview or "(attachment)"
        out.append(f"↩ {who(msg.reply.sender_id, me, names)}: {cut(said, 50)}\n      ", style="dim")
    text = body_text(msg.message_type, msg.custom_type, msg.body, msg.state, names)
    out.append(text.replace("\n", "\n      "), style="italic dim" if msg.state else "")
    if msg.edited:
        out.append(" (edited)", style="dim")
    if read:
        out.append(" ✓✓", style="green")
    return out


def unsent_line(row: PendingSend, online: bool = True, why: str = "") -> Text:
    """A send not yet in the store: 'me: text (sending…)', '(not sent yet: offline)'
    while there is no connection, '(sent)' or '(failed)' (`why`: what follows "failed",
    e.g. ": POLICY_REFUSED: spam is not welcome here · /edit"; qim/desktop/refused.py)."""
    out = Text()
    out.append(f"{clock(row.created_local_ms)} ", style="dim")
    out.append("me: ", style="bold cyan")
    out.append(body_text(row.message_type, row.custom_type, row.body, 0).replace("\n", "\n      "))
    pending = " (sending…)" if online else " (not sent yet: offline)"
    mark = {"pending": pending, "acked": " (sent)", "failed": f" (failed{why})"}.get(row.state, "")
    out.append(mark, style="red" if row.state == "failed" or not online else "dim")
    return out


def transcript(messages: Iterable[StoredMessage], unsent: Iterable[PendingSend], me: int,
               note: str = "", names: Names = NO_NAMES, online: bool = True,
               why: Callable[[bytes], str] = lambda cmid: "", read_upto: int = 0,
               below: Callable[[StoredMessage], str] = lambda m: "") -> Text:
    """The conversation view: an optional note line, messages, then unsent sends (`why`:
    a failed row's reason by its client_message_id, see unsent_line); my messages up to
    `read_upto` (the peer's read position of a direct chat) end with ' ✓✓'; `below`
    gives a message's reactions line ("" none; qim/desktop/reacts.py)."""
    out = Text()
    if note:
        out.append(note + "\n", style="dim")
    lines = [_with_below(message_line(m, me, names, m.sender_id == me and m.conversation_seq <= read_upto),
                         below(m)) for m in messages] + [unsent_line(p, online, why(p.client_message_id)) for p in unsent]
    out.append(Text("\n").join(lines) if lines else Text("(no messages yet)", style="dim"))
    return out


def _with_below(line: Text, extra: str) -> Text:
    if extra:
        line.append("\n      " + extra, style="yellow")
    return line


def connection_words(state: str, reason: str = "") -> str:
    """The connection state as shown: '● online', '○ offline: token expired', ...
    A terminal state names its reason (the SDK's ConnectionState.reason, e.g. "token
    refused: token expired"), never only "offline"."""
    words = STATE_WORDS.get(state, f"○ {state}")
    if state in ("offline", "kicked") and reason:
        words += f": {reason.removeprefix('token refused: ') if 'token' in reason else reason}"
    return words


def kicked_words(reason: str) -> str:
    """What qim-desktop says when it stops because the server ended the session (the
    SDK's ConnectionState("kicked", reason): "REVOKED" when an operator revoked the
    device's sign-in, docs/sdk.md; "banned until …: <reason>" for an operator's ban,
    printed as it is; anything else is this device signing in elsewhere)."""
    if reason.startswith("banned "):  # qim.sdk Banned's words (docs/decisions/0123, Amendment 2)
        return reason
    if reason == "REVOKED":
        return "kicked: an operator revoked this device's sign-in; sign in again"
    return "kicked: this device logged in again elsewhere"


def status_line(user: str, state: str, reason: str, endpoint: str, device_id: int) -> Text:
    """The top line, most important first (a narrow terminal cuts the tail)."""
    return Text(f" {user} · {connection_words(state, reason)} · {endpoint} · device {device_id}",
                no_wrap=True, overflow="ellipsis")
