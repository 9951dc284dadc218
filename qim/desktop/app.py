"""The full-screen qim-desktop app (Textual) over one connected qim.sdk.Client.

Layout: a status line (user, device, endpoint, connection state), the conversation
list with unread badges on the left, the open chat on the right (pages back through
history with Ctrl+U or /older), and a multi-line composer (Enter sends, Ctrl+J starts
a new line; any script and emoji). Slash commands: qim/desktop/commands.py.

The app only reacts to the SDK's typed events (ConversationsUpdated replaces list
entries, MessagesAdded/Updated/Removed change the open chat, ConnectionState is shown,
KickedEvent ends the app with exit code 3). Reconnects after a server restart are the
SDK's: the status line shows "reconnecting" and then "ready" again.
"""

from __future__ import annotations

import asyncio
from typing import Optional

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import ListItem, ListView, Static, TextArea

from qim.desktop import commands, render
from qim.errors import QimError
from qim.sdk import Client
from qim.sdk import events as ev
from qim.sdk.model import Conversation, StoredMessage

PAGE = 30
EXIT_KICKED = 3


class Composer(TextArea):
    """Multi-line input: Enter submits, Ctrl+J inserts a newline."""

    class Submitted(Message):
        """Posted when the person presses Enter: the text typed (a message or a /command)."""
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    async def _on_key(self, event) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            if self.text.strip():
                self.post_message(self.Submitted(self.text))
            self.clear()
            return
        if event.key == "ctrl+j":
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        await super()._on_key(event)


class ConvItem(ListItem):
    """One row of the conversation list (remembers its conversation_id)."""
    def __init__(self, conv: Conversation, text: Text) -> None:
        super().__init__(Static(text))
        self.conversation_id = conv.conversation_id
        self.text = text


class ChatApp(App):
    """qim-desktop's screen. `exit_code`/`exit_message` tell the caller how it ended."""

    CSS = """
    #status { height: 1; background: $primary; color: $text; }
    #body { height: 1fr; }
    #convs { width: 34; border-right: solid $primary; }
    #title { height: 1; text-style: bold; }
    #scroll { height: 1fr; }
    #composer { height: 5; }
    #notice { height: 1; color: $warning; }
    """
    BINDINGS = [Binding("ctrl+q", "leave_app", "Quit", priority=True),
                Binding("ctrl+u", "older", "Older messages", priority=True)]

    def __init__(self, client: Client, open_peer: Optional[int] = None) -> None:
        super().__init__()
        self.client = client
        self.open_peer = open_peer
        self.convs: dict[bytes, Conversation] = {}
        self.current: Optional[bytes] = None
        self.shown: dict[bytes, StoredMessage] = {}
        self.unsent: list = []
        self.note = ""
        self.exit_code = 0
        self.leaving = False  # set before exit(): queued SDK events must not redraw a closing screen
        self.exit_message = ""
        self.states_seen: list[str] = []  # connection states shown, in order

    def compose(self) -> ComposeResult:
        """The screen: status line, conversation list, open chat, notice line, composer."""
        yield Static(id="status")
        with Horizontal(id="body"):
            yield ListView(id="convs")
            with Vertical():
                yield Static(id="title")
                with VerticalScroll(id="scroll"):
                    yield Static(id="log")
                yield Composer(id="composer")
        yield Static(id="notice")

    async def on_mount(self) -> None:
        """Load the list from the store, open --chat when given, start taking SDK events."""
        self.show_status()
        self.query_one("#scroll", VerticalScroll).can_focus = False  # Tab: list <-> composer
        for conv in await self.client.conversations():
            self.convs[conv.conversation_id] = conv
        if self.open_peer:
            await self.open_chat((await self.client.open_direct(self.open_peer)).conversation_id)
        await self.show_list()
        self.query_one(Composer).focus()
        self.run_worker(self.pump(), exclusive=True, group="sdk-events")

    # --- SDK events ----------------------------------------------------------------
    async def pump(self) -> None:
        """Hand every SDK event to the screen, in order, for as long as the app runs."""
        queue = self.client.events
        if queue is None:  # the client is built with its event queue (cli.py)
            raise RuntimeError("qim-desktop needs the SDK client's event queue")
        while not self.leaving:
            await self.on_sdk_event(await queue.get())

    async def on_sdk_event(self, e) -> None:
        """Apply one SDK event to the screen (state, list, messages, kicks)."""
        if isinstance(e, ev.ConnectionState):
            self.states_seen.append(e.state)
            self.show_status()
            if e.state == "kicked":
                self.exit_code = EXIT_KICKED
                self.exit_message = "kicked: this device logged in again elsewhere"
                self.leaving = True
                self.exit()
        elif isinstance(e, ev.ConversationsUpdated):
            for conv in e.conversations:
                self.convs[conv.conversation_id] = conv
            await self.show_list()
        elif isinstance(e, (ev.MessagesAdded, ev.MessagesUpdated)):
            mine = [m for m in e.messages if m.conversation_id == self.current]
            for m in mine:
                self.shown[m.message_id] = m
            if mine:
                self.unsent = await self.client.unsent(self.current)
                self.show_chat(scroll_end=isinstance(e, ev.MessagesAdded))
                if isinstance(e, ev.MessagesAdded):
                    await self.read_current()
        elif isinstance(e, ev.MessagesRemoved):
            if any(self.shown.pop(mid, None) for mid in e.message_ids):
                self.show_chat()
        elif isinstance(e, (ev.SendPending, ev.PendingResolved, ev.SendFailed)):
            if self.current is not None:
                self.unsent = await self.client.unsent(self.current)
                self.show_chat(scroll_end=True)
        elif isinstance(e, ev.SyncFailed):
            self.tell(f"sync failed: {e.code.name}")

    # --- showing -------------------------------------------------------------------
    def show_status(self) -> None:
        """Redraw the status line: who, where, and the connection state."""
        c = self.client
        state = {"ready": "● online", "reconnecting": "○ reconnecting…", "syncing": "◐ syncing…",
                 "connecting": "◐ connecting…"}.get(c.state, f"○ {c.state}")
        self.query_one("#status", Static).update(
            Text(f" qim-desktop · user {c.user_id} · device {c.device_id} · {c.endpoint} · {state}"))

    async def show_list(self) -> None:
        """Redraw the conversation list, newest activity first, keeping the selection."""
        view = self.query_one("#convs", ListView)
        if self.leaving or not view.is_mounted:
            return
        ordered = sorted(self.convs.values(), key=lambda c: c.last_activity_id or b"", reverse=True)
        keep = view.index
        await view.clear()
        await view.extend([ConvItem(c, render.list_entry(c, self.client.user_id, c.conversation_id == self.current))
                           for c in ordered])
        ids = [c.conversation_id for c in ordered]
        if self.current in ids:
            view.index = ids.index(self.current)
        elif ids:
            view.index = min(keep or 0, len(ids) - 1)

    def show_chat(self, scroll_end: bool = False) -> None:
        """Redraw the open chat (in conversation_seq order, unsent ones last)."""
        conv = self.convs.get(self.current) if self.current else None
        title = render.conversation_name(conv) if conv else "no chat open: /dm USER or pick one on the left"
        self.query_one("#title", Static).update(Text(f" {title}"))
        messages = sorted(self.shown.values(), key=lambda m: m.conversation_seq)
        self.query_one("#log", Static).update(render.transcript(messages, self.unsent, self.client.user_id,
                                                                self.note))
        if scroll_end:
            self.query_one("#scroll", VerticalScroll).scroll_end(animate=False)

    def list_text(self) -> str:
        """The conversation list as plain text (what the person reads)."""
        return "\n".join(item.text.plain for item in self.query(ConvItem))

    def tell(self, text: str) -> None:
        """Show one line in the notice area (empty clears it)."""
        self.query_one("#notice", Static).update(Text(text))

    def transcript_text(self) -> str:
        """The open chat as plain text (what the person reads)."""
        messages = sorted(self.shown.values(), key=lambda m: m.conversation_seq)
        return render.transcript(messages, self.unsent, self.client.user_id, self.note).plain

    # --- actions -------------------------------------------------------------------
    async def open_chat(self, conversation_id: bytes) -> None:
        """Open a conversation: its newest page from the store, its unsent messages, then mark it read."""
        self.current = conversation_id
        conv = await self.client.conversation(conversation_id)
        if conv is not None:
            self.convs[conversation_id] = conv
        self.shown = {m.message_id: m for m in await self.client.messages(conversation_id, limit=PAGE)}
        self.unsent = await self.client.unsent(conversation_id)
        self.note = ""
        self.show_chat(scroll_end=True)
        await self.read_current()
        await self.show_list()

    async def read_current(self) -> None:
        """Mark the open chat read up to its newest message (a failure is shown, not raised)."""
        if self.current is None or not self.shown:
            return
        try:
            await self.client.mark_read(self.current)
        except QimError as exc:
            self.tell(f"mark read failed: {exc}")

    async def on_list_view_selected(self, event: ListView.Selected) -> None:
        """A row of the list was chosen: open that chat."""
        if isinstance(event.item, ConvItem):
            await self.open_chat(event.item.conversation_id)
            self.query_one(Composer).focus()

    async def action_older(self) -> None:
        """Page back: the next older page of the open chat (history back-fill when needed)."""
        if self.current is None:
            return
        oldest = min((m.conversation_seq for m in self.shown.values()), default=0)
        older = await self.client.messages(self.current, before_seq=oldest, limit=PAGE) if oldest else []
        for m in older:
            self.shown[m.message_id] = m
        self.note = "" if older else "(beginning of the conversation)"
        self.show_chat()
        self.query_one("#scroll", VerticalScroll).scroll_home(animate=False)

    async def action_leave_app(self) -> None:
        """Quit the app (the key binding)."""
        self.leaving = True
        self.exit()

    async def on_composer_submitted(self, event: Composer.Submitted) -> None:
        """Run what was typed: a /command or a message to the open chat; errors are shown."""
        try:
            command, text = commands.parse(event.text)
            if command is None:
                await self.send(text)
            else:
                await self.run_command(command)
        except commands.CommandError as exc:
            self.tell(str(exc))
        except QimError as exc:
            self.tell(f"{exc.code.name}: {exc}")

    async def send(self, text: str) -> None:
        """Send text to the open chat (pending until acknowledged; never waits for the server)."""
        if self.current is None:
            self.tell("open a chat first: /dm USER, /group USER..., or pick one on the left")
            return
        await self.client.send_text(self.current, text, wait=False)
        self.tell("")

    async def run_command(self, cmd: commands.Command) -> None:
        """Run one parsed /command (dm, group, leave, members, recall, older, read, help, quit)."""
        c = self.client
        conv = self.convs.get(self.current) if self.current else None
        if cmd.name == "quit":
            self.leaving = True
            self.exit()
        elif cmd.name == "help":
            self.tell(" ".join(line.split()[0] for line in commands.HELP.splitlines() if line.strip()))
        elif cmd.name == "dm":
            await self.open_chat((await c.open_direct(cmd.ids[0])).conversation_id)
        elif cmd.name == "group":
            group = await c.create_group(list(cmd.ids))
            self.tell(f"created group {group.group_id}")
            await self.open_chat(group.conversation_id)
        elif cmd.name == "older":
            await self.action_older()
        elif conv is None:
            self.tell(f"/{cmd.name} needs an open chat")
        elif cmd.name == "read":
            await c.mark_read(conv.conversation_id)
        elif cmd.name in ("leave", "members") and not conv.is_group:
            self.tell(f"/{cmd.name} works in a group chat")
        elif cmd.name == "leave":
            await c.leave_group(conv.group_id)
            self.tell(f"you left group {conv.group_id}")
        elif cmd.name == "members":
            members = await c.members(conv.group_id)
            self.tell("members: " + ", ".join(f"{m.user_id}{' (owner)' if m.owner else ''}" for m in members))
        elif cmd.name == "recall":
            await self.recall(cmd.ids[0] if cmd.ids else None)

    async def recall(self, seq: Optional[int]) -> None:
        """Recall this person's newest message (or the one at #seq) in the open chat."""
        own = [m for m in self.shown.values() if m.sender_id == self.client.user_id and m.state == 0
               and (seq is None or m.conversation_seq == seq)]
        if not own:
            self.tell("no message of yours to recall" + (f" at #{seq}" if seq else ""))
            return
        target = max(own, key=lambda m: m.conversation_seq)
        await self.client.recall(target.conversation_id, target.message_id)
        self.tell(f"recalled #{target.conversation_seq}")


async def run_app(client: Client, open_peer: Optional[int] = None, *, headless: bool = False) -> ChatApp:
    """Run the app until it exits; returns it (exit_code, exit_message)."""
    app = ChatApp(client, open_peer)
    await app.run_async(headless=headless)
    await asyncio.sleep(0)
    return app
