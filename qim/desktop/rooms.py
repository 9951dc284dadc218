"""qim-desktop's chatrooms (docs/sdk.md "Chatrooms"; docs/desktop.md): `/join ROOM`
joins a room and shows it in the chat pane, `/leave` leaves the room shown, and what is
typed while a room is shown is posted to it.

A room pane shows what the SDK told for the room (RoomEventsAdded, memory only: nothing
of a room is in the list, the store or unread): posts as 'time name: text', joins and
leaves as a dim line, recalled posts as "(message recalled)", and a truncation bar
where the SDK said its replay could not be complete (the person was away longer than
the room's ring, or the room's server restarted): earlier messages are missing there,
never silently. The title line says the room, its member count and its state
(joining, rejoining after a reconnect, left with the reason). Opening a chat hides the
room (it stays joined and keeps collecting); `/join ROOM` shows it again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from rich.text import Text

from qim.desktop import render
from qim.sdk.room_events import RoomEventsAdded, RoomMessage, RoomStateChanged

ChatApp = Any  # qim/desktop/app.py (typed loosely: that module imports this one)
KEPT = 500  # lines of a room pane
TRUNCATED_BAR = "⚠ earlier messages of this room are missing here: you were away longer than the room keeps " \
                "them, or its server restarted"


@dataclass(frozen=True)
class Bar:
    """Where a replay was truncated."""


@dataclass
class RoomPane:
    """One joined room as the desktop shows it."""

    room_id: int
    state: str = "joining"
    reason: str = ""
    member_count: int = 0
    items: list[Union[RoomMessage, Bar]] = field(default_factory=list)

    def add(self, e: RoomEventsAdded) -> None:
        """Apply a RoomEventsAdded: a bar first when truncated, posts, recalls in place."""
        if e.member_count:
            self.member_count = e.member_count
        if e.truncated:
            self.items.append(Bar())
        for m in e.events:
            if m.kind == "recall":
                for i, old in enumerate(self.items):
                    if isinstance(old, RoomMessage) and (old.room_epoch, old.room_seq) == (m.room_epoch,
                                                                                          m.recalled_seq):
                        self.items[i] = RoomMessage(old.room_id, old.room_epoch, old.room_seq, old.kind,
                                                    old.sender_id, old.sender_name, recalled=True)
            else:
                self.items.append(m)
        del self.items[:-KEPT]

    @property
    def truncated(self) -> bool:
        """True when a truncation bar is shown."""
        return any(isinstance(i, Bar) for i in self.items)


def title(pane: RoomPane) -> str:
    """'room 42 · 3 members · joined' (and why, when it was left)."""
    members = f"{pane.member_count} member{'s' if pane.member_count != 1 else ''}"
    state = pane.state + (f": {pane.reason}" if pane.reason and pane.state == "left" else "")
    return f"room {pane.room_id} · {members} · {state}"


def line(item: Union[RoomMessage, Bar], me: int, names: render.Names) -> Text:
    """One line of a room pane."""
    if isinstance(item, Bar):
        return Text(TRUNCATED_BAR, style="bold yellow on red")
    out = Text()
    out.append(f"{render.clock(item.created_at_ms)} ", style="dim")
    name = render.who(item.sender_id, me, names) if not item.sender_name or item.sender_id == me \
        else f"{item.sender_name} ({item.sender_id})"
    if item.kind in ("joined", "left"):
        out.append(f"· {name} {item.kind} the room", style="dim")
    elif item.recalled:
        out.append(f"{name}: ", style="bold")
        out.append("(message recalled)", style="italic dim")
    else:
        out.append(f"{name}: ", style="bold cyan" if item.sender_id == me else "bold")
        out.append(render.body_text(item.message_type, item.custom_type, item.body, 0).replace("\n", "\n      "))
    return out


def transcript(pane: RoomPane, me: int, names: render.Names) -> Text:
    """The whole pane, oldest first."""
    out = Text()
    for i, item in enumerate(pane.items):
        if i:
            out.append("\n")
        out.append_text(line(item, me, names))
    return out


def on_event(app: ChatApp, e: Union[RoomEventsAdded, RoomStateChanged]) -> None:
    """Apply a room event of the SDK to the app's panes; redraw when that room is shown."""
    pane = app.rooms.get(e.room_id)
    if pane is None:
        return
    if isinstance(e, RoomEventsAdded):
        pane.add(e)
    else:
        pane.state, pane.reason = e.state, e.reason
        if e.member_count:
            pane.member_count = e.member_count
    if app.room == e.room_id:
        app.show_chat(scroll_end=True)


async def join(app: ChatApp, room_id: int) -> None:
    """`/join ROOM`: join (or show again) a room. The SDK's errors propagate."""
    app.current = None
    app.room = room_id
    if room_id not in app.rooms:
        app.rooms[room_id] = RoomPane(room_id)
        try:
            info = await app.client.join_room(room_id, recent=50)
        except BaseException:
            app.rooms.pop(room_id, None)
            app.room = None
            raise
        app.rooms[room_id].member_count = info.member_count
    app.show_chat(scroll_end=True)
    await app.show_list()
    app.tell(f"in room {room_id}: what you type is posted to the room; /leave leaves it")


async def leave(app: ChatApp) -> None:
    """`/leave` with a room shown: leave it and close the pane."""
    room_id = app.room
    app.rooms.pop(room_id, None)
    app.room = None
    count = await app.client.leave_room(room_id)
    app.show_chat()
    app.tell(f"you left room {room_id} ({count} member{'s' if count != 1 else ''} left in it)")


async def post(app: ChatApp, text: str) -> None:
    """Post typed text to the room shown (acknowledged before the composer clears)."""
    await app.client.send_room(app.room, text)
    app.tell("")
