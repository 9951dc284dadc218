"""How qim-desktop's screen follows the SDK's typed events (qim.sdk.events): the list
(ConversationsUpdated replaces entries), the open chat (MessagesAdded/Updated/Removed),
unsent rows, refusals, rooms, and the connection state with its reason (KickedEvent ends
the app with exit code 3).

Names: every user the list shows (a direct chat's peer, the sender of a row's preview)
is looked up when the row arrives, so a row reads "Bob (1003)" and "Bob: …" before its
chat was ever opened (docs/desktop.md "The screen").
"""

from __future__ import annotations

from typing import Any, Iterable

from qim.desktop import reacts, refused, render, rooms
from qim.sdk import events as ev
from qim.sdk.model import Conversation
from qim.sdk.reactions import ReactionsChanged, TypingChanged
from qim.sdk.room_events import RoomEventsAdded, RoomStateChanged

ChatApp = Any  # qim/desktop/app.py's ChatApp (typed loosely: that module imports this one)
EXIT_KICKED = 3


def people(convs: Iterable[Conversation]) -> set[int]:
    """The users a list row names: direct peers and the senders of the previews."""
    out = set()
    for conv in convs:
        out.add(conv.peer_user_id)
        if conv.last_message is not None:
            out.add(conv.last_message.sender_id)
    out.discard(0)
    return out


async def apply(app: ChatApp, e) -> None:
    """Apply one SDK event to the screen (state, list, messages, kicks)."""
    if isinstance(e, ev.ConnectionState):
        await on_state(app, e)
    elif isinstance(e, ev.ConversationsUpdated):
        for conv in e.conversations:
            app.convs[conv.conversation_id] = conv
        await app.show_list()
        if app.current in e.conversation_ids:
            app.show_title()
        await app.learn_names(people(e.conversations))
    elif isinstance(e, (ev.MessagesAdded, ev.MessagesUpdated)):
        # the open page grows at its end; older messages are reached by paging back
        oldest = min((m.conversation_seq for m in app.shown.values()), default=0)
        mine = [m for m in e.messages if m.conversation_id == app.current and
                (m.message_id in app.shown or (isinstance(e, ev.MessagesAdded) and m.conversation_seq > oldest))]
        for m in mine:
            app.shown[m.message_id] = m
        if mine:
            app.unsent = await app.client.unsent(app.current)
            app.show_chat()
            if isinstance(e, ev.MessagesAdded):
                await app.read_current()
        await app.learn_names(m.sender_id for m in e.messages)
    elif isinstance(e, ev.MessagesRemoved):
        if any(app.shown.pop(mid, None) for mid in e.message_ids):
            app.show_chat()
    elif isinstance(e, (ev.SendPending, ev.PendingResolved, ev.SendFailed)):
        if isinstance(e, ev.SendFailed):  # its text back to the composer, or /edit (refused.py)
            await refused.on_send_failed(app, e)
        if app.current is not None:
            app.unsent = await app.client.unsent(app.current)
            app.show_chat()
    elif isinstance(e, (RoomEventsAdded, RoomStateChanged)):
        rooms.on_event(app, e)
    elif isinstance(e, ev.ConversationStateChanged):  # pin, mute, hide, marks (marks.py)
        await app.show_list()
    elif isinstance(e, ev.PeerRead):  # a read tick of the open direct chat
        if e.conversation_id == app.current:
            app.show_chat()
    elif isinstance(e, (ReactionsChanged, TypingChanged)):  # reactions under messages, typing in the header
        reacts.on_event(app, e)
    elif isinstance(e, ev.SyncFailed):
        app.tell(f"sync failed: {e.code.name}: {e.message}")


async def on_state(app: ChatApp, e: ev.ConnectionState) -> None:
    """Show a connection state; a terminal one says why and what to do."""
    app.states_seen.append(e.state)
    app.reason = e.reason if e.state in ("offline", "kicked") else ""
    app.show_status()
    if e.state == "kicked":
        app.exit_code = EXIT_KICKED
        app.exit_message = render.kicked_words(e.reason)
        app.leaving = True
        app.exit()
        return
    if e.state == "offline" and e.reason.startswith("banned ") and not app.leaving:
        app.tell(f"{e.reason}. Messages wait unsent; quit (Ctrl+Q)")  # a refused login of a banned user
    elif e.state == "offline" and e.reason and not app.leaving:
        app.tell(f"offline: {e.reason}. Messages wait unsent; quit (Ctrl+Q) and start qim-desktop again "
                 "(with a new --token, or --user for fresh tokens)")
    if app.current is not None:
        app.show_chat()  # pending rows now read "not sent yet" or "sending"
