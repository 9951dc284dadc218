"""Pin, mute and hide in qim-desktop, and what the screen marks (docs/desktop.md; the
SDK side is qim/sdk/convstate.py, docs/decisions/0122): /pin, /unpin, /mute [MINUTES],
/unmute and /hide act on the open chat for every device of the user; the list shows
pinned chats first with "📌", muted ones with "🔕" (their unread count stays), "@" when
an unread message mentions you; the open direct chat marks your messages the peer read
with "✓✓".
"""

from __future__ import annotations

import time
from typing import Any

from qim.desktop import render
from qim.sdk.convstate import ConversationState
from qim.sdk.model import Conversation

COMMANDS = ("pin", "unpin", "mute", "unmute", "hide")


def list_marks(state: ConversationState) -> str:
    """The marks after a list row's name ("" for none)."""
    return ("📌" if state.pinned else "") + ("🔕" if state.muted() else "") + ("@" if state.mentioned else "")


def read_upto(client: Any, conv: Conversation | None) -> int:
    """The open chat's peer read position for the "✓✓" marks (0: a group, or none known)."""
    if conv is None or conv.is_group:
        return 0
    return client.conversation_state(conv.conversation_id).peer_read_seq


async def run(client: Any, conv: Conversation, name: str, minutes: int, names: render.Names) -> str:
    """Run one of COMMANDS on `conv`; the notice line saying what was done."""
    chat = render.conversation_name(conv, names)
    cid = conv.conversation_id
    if name in ("pin", "unpin"):
        await client.pin(cid, name == "pin")
        return f"{chat} {'pinned to the top of the list' if name == 'pin' else 'unpinned'}"
    if name == "mute":
        until = int(time.time() * 1000) + minutes * 60_000 if minutes else None
        await client.mute(cid, until)
        return f"{chat} muted" + (f" for {minutes} min" if minutes else "") + ": unread still counts, mentions still show @"
    if name == "unmute":
        await client.unmute(cid)
        return f"{chat} unmuted"
    await client.hide(cid)
    return f"{chat} hidden until its next message"
