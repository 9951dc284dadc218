"""The full-screen qim-desktop app (Textual) over one connected qim.sdk.Client.

Layout: a status line (who, connection state and why, endpoint, device), the
conversation list with unread badges and a key hint on the left, the open chat on the
right (kept scrolled to the newest message until the person scrolls back; Ctrl+U or
/older pages back through history), a multi-line composer (Enter sends, Ctrl+J starts a
new line; any script and emoji) and a notice line (the outcome of the last command, a
refusal, or why the client is offline). Keys and commands: qim/desktop/commands.py,
docs/desktop.md.

The app only reacts to the SDK's typed events (ConversationsUpdated replaces list
entries, MessagesAdded/Updated/Removed change the open chat, ConnectionState is shown
with its reason, KickedEvent ends the app with exit code 3). Reconnects after a server
restart are the SDK's: the status line shows "reconnecting" and then "online" again.
"""

from __future__ import annotations

import asyncio
from typing import Iterable, Optional

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static

from qim.desktop import actions, compose, marks, media, reacts, refused, render, rooms, sdk_events
from qim.desktop.widgets import Composer, ConvItem, ConvList
from qim.errors import QimError
from qim.sdk import Client
from qim.sdk import names as sdk_names
from qim.sdk.model import Conversation, StoredMessage
from qim.sdk.reactions import ReactionSummary

PAGE = 30
EXIT_KICKED = sdk_events.EXIT_KICKED
LIST_KEYS = "↑ ↓ choose · Enter open\nTab: list ⇄ composer"
HINT = "/help lists the commands · Tab: list ⇄ composer · Ctrl+U older · Ctrl+Q quit"
NAME_ASKS = 6  # a user without a name is asked again this many times (about a minute), then shown by id


class ChatApp(App):
    """qim-desktop's screen. `exit_code`/`exit_message` tell the caller how it ended."""

    CSS = """
    #status { height: 1; background: $primary; color: $text; }
    #body { height: 1fr; }
    #side { width: 30; border-right: solid $primary; }
    #convs { height: 1fr; }
    #keys { height: 2; color: $text-muted; }
    #title { height: 1; text-style: bold; }
    #scroll { height: 1fr; }
    #composer { height: 5; }
    #notice { height: auto; max-height: 14; color: $warning; }
    ConvItem Static { text-wrap: nowrap; text-overflow: ellipsis; }
    """
    BINDINGS = [Binding("ctrl+q", "leave_app", "Quit", priority=True),
                Binding("ctrl+u", "older", "Older messages", priority=True),
                Binding("escape", "dismiss", "Close the notice")]

    def __init__(self, client: Client, open_peer: Optional[int] = None) -> None:
        super().__init__()
        self.client = client
        self.open_peer = open_peer
        self.convs: dict[bytes, Conversation] = {}
        self.current: Optional[bytes] = None
        self.shown: dict[bytes, StoredMessage] = {}
        self.reactions: dict[bytes, ReactionSummary] = {}  # message_id -> its reactions (reacts.py)
        self.rooms: dict[int, rooms.RoomPane] = {}  # joined chatrooms (qim/desktop/rooms.py)
        self.room: Optional[int] = None  # the room shown instead of a chat
        self.unsent: list = []
        self.names: dict[int, str] = {}
        self._unnamed: dict[int, int] = {}  # user -> how many times asked without a name
        self.note = ""
        self.exit_code = 0
        self.leaving = False  # set before exit(): queued SDK events must not redraw a closing screen
        self.exit_message = ""
        self.states_seen: list[str] = []  # connection states shown, in order
        self.reason = ""  # why the client is offline (the SDK's ConnectionState.reason)
        self.held = compose.Held()  # submissions held back behind a refused one
        self.refusal = ""  # the last refusal shown
        self.refusals = refused.Refusals()  # sends refused after they left the composer
        self._list_lock = asyncio.Lock()  # one list redraw at a time (interleaved ones doubled rows)

    def compose(self) -> ComposeResult:
        """The screen: status line, list and key hint, open chat, composer, notice line."""
        yield Static(id="status")
        with Horizontal(id="body"):
            with Vertical(id="side"):
                yield ConvList(id="convs", composer_id="composer")
                yield Static(LIST_KEYS, id="keys")
            with Vertical():
                yield Static(id="title")
                with VerticalScroll(id="scroll"):
                    yield Static(id="log")
                yield Composer(id="composer")
        yield Static(id="notice")

    async def on_mount(self) -> None:
        """Load the list from the store, open --chat when given, start taking SDK events."""
        self.show_status()
        scroll = self.query_one("#scroll", VerticalScroll)
        scroll.can_focus = False  # Tab: list <-> composer
        scroll.anchor()  # stays at the newest message as the chat grows, until scrolled back
        self.names[self.client.user_id] = self.client.display_name
        for conv in await self.client.conversations():
            self.convs[conv.conversation_id] = conv
        if self.open_peer:
            await self.open_chat((await self.client.open_direct(self.open_peer)).conversation_id)
        else:
            self.show_chat()
        await self.show_list()
        self.query_one(Composer).focus()
        self.tell("")
        self.run_worker(self.pump(), exclusive=True, group="sdk-events")
        self.run_worker(self.learn_names(sdk_events.people(self.convs.values())), group="names")
        self.run_worker(media.resume(self), group="media")  # an attachment a quit cut (issue 40)

    # --- SDK events ----------------------------------------------------------------
    async def pump(self) -> None:
        """Hand every SDK event to the screen, in order, for as long as the app runs."""
        queue = self.client.events
        if queue is None:  # the client is built with its event queue (cli.py)
            raise RuntimeError("qim-desktop needs the SDK client's event queue")
        while not self.leaving:
            await self.on_sdk_event(await queue.get())

    async def on_sdk_event(self, e) -> None:
        """Apply one SDK event to the screen (qim/desktop/sdk_events.py)."""
        await sdk_events.apply(self, e)

    # --- showing -------------------------------------------------------------------
    @property
    def online(self) -> bool:
        """True unless the client stopped for good (offline, kicked)."""
        return self.client.state not in ("offline", "kicked")

    def show_status(self) -> None:
        """Redraw the status line: who, the connection state (and why), where."""
        c = self.client
        me = f"{c.display_name} ({c.user_id})" if c.display_name else f"user {c.user_id}"
        self.query_one("#status", Static).update(render.status_line(me, c.state, self.reason, c.endpoint,
                                                                    c.device_id))

    async def show_list(self) -> None:
        """Redraw the conversation list, newest activity first, keeping the selection.
        Rows are updated in place when the order did not change (no flicker)."""
        async with self._list_lock:
            view = self.query_one("#convs", ConvList)
            if self.leaving or not view.is_mounted:
                return
            ordered = self.client.convstates.shape(  # pinned first, hidden left out (marks.py)
                sorted(self.convs.values(), key=lambda c: c.last_activity_id or b"", reverse=True))
            ids = [c.conversation_id for c in ordered]
            texts = [render.list_entry(c, self.client.user_id, c.conversation_id == self.current, self.names,
                                       marks.list_marks(self.client.conversation_state(c.conversation_id)))
                     for c in ordered]
            items = list(view.query(ConvItem))
            if [item.conversation_id for item in items] == ids:
                for item, text in zip(items, texts):
                    item.show(text)
                return
            keep = view.index
            await view.clear()
            await view.extend([ConvItem(c, t) for c, t in zip(ordered, texts)])
            if self.current in ids:
                view.index = ids.index(self.current)
            elif ids:
                view.index = min(keep or 0, len(ids) - 1)

    def show_title(self) -> None:
        """The open chat's name above it (or how to open one)."""
        if self.room is not None and self.room in self.rooms:
            self.query_one("#title", Static).update(Text(f" {rooms.title(self.rooms[self.room])}", no_wrap=True))
            return
        conv = self.convs.get(self.current) if self.current else None
        title = render.conversation_name(conv, self.names) if conv else \
            "no chat open: /dm USER, or pick one on the left (Tab, ↑ ↓, Enter)"
        self.query_one("#title", Static).update(Text(f" {title}{reacts.typing_words(self)}", no_wrap=True,
                                                     overflow="ellipsis"))

    def show_chat(self, scroll_end: bool = False) -> None:
        """Redraw the open chat (in conversation_seq order, unsent ones last);
        `scroll_end` brings the newest message into view (and keeps it there)."""
        self.show_title()
        self.query_one("#log", Static).update(self._transcript())
        if scroll_end:
            self.query_one("#scroll", VerticalScroll).scroll_end(animate=False)

    def _transcript(self) -> Text:
        if self.room is not None and self.room in self.rooms:
            return rooms.transcript(self.rooms[self.room], self.client.user_id, self.names)
        if self.current is None:
            return Text("")
        messages = sorted(self.shown.values(), key=lambda m: m.conversation_seq)
        return render.transcript(messages, self.unsent, self.client.user_id, self.note, self.names, self.online,
                                 lambda cmid: refused.row_words(self, cmid),
                                 marks.read_upto(self.client, self.convs.get(self.current)),
                                 lambda m: reacts.line(self.reactions.get(m.message_id)))

    def list_ids(self) -> list[bytes]:
        """The conversation_ids of the list rows, top to bottom."""
        return [item.conversation_id for item in self.query(ConvItem)]

    def list_text(self) -> str:
        """The conversation list as plain text (what the person reads)."""
        return "\n".join(item.text.plain for item in self.query(ConvItem))

    def tell(self, text: str, lines: bool = False) -> None:
        """Show one line in the notice area (`lines`: several, e.g. /help); empty shows the key hint."""
        shown = text if lines else " ".join(text.split())
        self.query_one("#notice", Static).update(Text(shown) if text else Text(HINT, style="dim"))

    def notice_text(self) -> str:
        """The notice area as plain text."""
        return str(self.query_one("#notice", Static).render())

    def transcript_text(self) -> str:
        """The open chat as plain text (what the person reads)."""
        return self._transcript().plain

    async def learn_names(self, user_ids: Iterable[int]) -> None:
        """Display names of these users (the SDK's cache, else one request); redraws
        when one was new. A user without a name yet keeps its id and is asked again
        later (the SDK paces that: qim.sdk.names). A failure leaves ids shown, and is told."""
        wanted = {u for u in user_ids if u and u not in self.names}
        if not wanted:
            return
        try:
            found = await self.client.display_names(sorted(wanted))
        except QimError as exc:
            self.tell(f"display names not available: {exc}")
            return
        fresh = {u: n for u, n in found.items() if n and self.names.get(u) != n}
        self.names.update((u, n) for u, n in found.items() if n)
        # the server learns a name at that user's first login: ask again a few times
        # (nothing else may ask: a peer who never writes would keep its id for good)
        again = {u for u in wanted if not found.get(u) and self._unnamed.get(u, 0) < NAME_ASKS}
        for u in again:
            self._unnamed[u] = self._unnamed.get(u, 0) + 1
        if again and not self.leaving:
            self.set_timer(sdk_names.EMPTY_RETRY_S + 1, lambda: self.run_worker(self.learn_names(again), group="names"))
        if fresh and not self.leaving:
            await self.show_list()
            if self.current is not None:
                self.show_chat()

    # --- actions -------------------------------------------------------------------
    async def open_chat(self, conversation_id: bytes) -> None:
        """Open a conversation: its newest page from the store, its unsent messages, then mark it read."""
        self.current, self.room = conversation_id, None  # a room shown stays joined
        conv = await self.client.conversation(conversation_id)
        if conv is not None:
            self.convs[conversation_id] = conv
        self.shown = {m.message_id: m for m in await self.client.messages(conversation_id, limit=PAGE)}
        self.unsent = await self.client.unsent(conversation_id)
        self.note = ""
        await reacts.load(self)  # the newest page's reactions (reacts.py)
        self.show_chat(scroll_end=True)
        await self.read_current()
        await self.show_list()
        await self.learn_names(m.sender_id for m in self.shown.values())

    async def read_current(self) -> None:
        """Mark the open chat read up to its newest message (a failure is shown, not raised)."""
        if self.current is None or not self.shown:
            return
        try:
            await self.client.mark_read(self.current)
        except QimError as exc:
            self.tell(f"mark read failed: {exc}")

    async def on_list_view_selected(self, event: ConvList.Selected) -> None:
        """A row of the list was chosen: open that chat."""
        if isinstance(event.item, ConvItem):
            await self.open_chat(event.item.conversation_id)
            self.query_one(Composer).focus()
            self.tell("")

    async def action_older(self) -> None:
        """Page back: the next older page of the open chat (history back-fill when needed)."""
        if self.current is None:
            self.tell(actions.older_note(None) + ": /dm USER, or pick one on the left")
            return
        oldest = min((m.conversation_seq for m in self.shown.values()), default=0)  # 0: none shown, the newest
        try:
            older = await self.client.messages(self.current, before_seq=oldest, limit=PAGE)
        except QimError as exc:  # a key binding must never take the app down
            self.tell(f"older messages not available: {exc.code.name}: {exc}")
            return
        for m in older:
            self.shown[m.message_id] = m
        store = self.client.store  # a short page is the beginning only when history said so (not offline)
        first = len(older) < PAGE and await store.run(store.oldest_reached, self.current)
        self.note = "(beginning of the conversation)" if first else ""
        self.show_chat()
        scroll = self.query_one("#scroll", VerticalScroll)

        def home() -> None:  # once laid out; a chat that fits stays anchored ("home" hid its newest line)
            if scroll.max_scroll_y > 0:
                scroll.scroll_home(animate=False)  # the oldest line in view: releases the anchor
        self.call_after_refresh(home)
        self.tell(actions.older_note(len(older), first))
        await self.learn_names(m.sender_id for m in older)

    async def action_leave_app(self) -> None:
        """Quit the app (the key binding)."""
        self.leaving = True
        self.exit()

    async def on_composer_submitted(self, event: Composer.Submitted) -> None:
        """Run what was typed: a /command or a message to the open chat, in the order
        submitted; a refusal holds back what was submitted behind it (qim/desktop/compose.py)."""
        await compose.submitted(self, event)

    async def on_text_area_changed(self, event: Composer.Changed) -> None:
        """The person typed: the open chat's members see "typing…" (reacts.py)."""
        if event.text_area.text.strip() and not event.text_area.text.startswith("/"):
            await reacts.typed(self)

    def action_dismiss(self) -> None:
        """Escape: close what the notice area shows (the /help list, a refusal)."""
        self.tell("")


async def run_app(client: Client, open_peer: Optional[int] = None, *, headless: bool = False) -> ChatApp:
    """Run the app until it exits; returns it (exit_code, exit_message; `return_code`
    is Textual's: 1 after an unhandled exception, see cli.exit_status)."""
    app = ChatApp(client, open_peer)
    await app.run_async(headless=headless)
    await asyncio.sleep(0)
    return app
