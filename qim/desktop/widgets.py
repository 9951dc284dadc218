"""The widgets of qim-desktop's screen that differ from Textual's own: the composer,
the conversation list and its rows.

Keys (docs/desktop.md): Tab and Shift+Tab move between the list and the composer; in
the list ↑/↓ choose a conversation and Enter opens it; a letter typed while the list
has the focus goes to the composer (never lost); in the composer Enter submits and
Ctrl+J starts a new line.
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widgets import ListItem, ListView, Static, TextArea

from qim.desktop.replies import complete
from qim.sdk.model import Conversation


class Composer(TextArea):
    """Multi-line input: Enter submits (and empties it at once, so keys typed while the
    app handles the text start the next message), Ctrl+J inserts a newline. A refused
    text is put back by the app (`restore`)."""

    class Submitted(Message):
        """Posted when the person presses Enter: the text typed (a message or a /command)
        and its `number` (1, 2, ... in the order they were submitted)."""
        def __init__(self, text: str, number: int = 0) -> None:
            super().__init__()
            self.text = text
            self.number = number

    submitted = 0  # how many texts were submitted so far (the number of the newest)

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.submit()
            return
        if event.key == "ctrl+j":
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        if event.key == "tab":  # '@' and the start of a name: Tab completes it (qim/desktop/replies.py)
            done = complete(self.text, getattr(self.app, "names", {}).values())
            if done is not None:
                event.stop()
                event.prevent_default()
                self.load_text(done)
                self.move_cursor(self.document.end)
                return
        await super()._on_key(event)

    def submit(self) -> None:
        """What Enter does: post the text typed (unless blank) and empty the composer."""
        text = self.text
        if text.strip():
            self.clear()
            self.submitted += 1
            self.post_message(self.Submitted(text, self.submitted))

    def restore(self, text: str, at: int = 0) -> int:
        """Put a refused `text` back at character `at` (0: first), before anything typed
        since (nothing typed is lost); returns where the next one held goes (after it)."""
        typed = self.text
        self.load_text(typed[:at] + text + typed[at:])
        self.move_cursor(self.document.end)
        return at + len(text)


class ConvItem(ListItem):
    """One row of the conversation list (remembers its conversation_id)."""

    def __init__(self, conv: Conversation, text: Text) -> None:
        super().__init__(Static(text))
        self.conversation_id = conv.conversation_id
        self.text = text

    def show(self, text: Text) -> None:
        """Redraw the row with `text` (the same conversation, new values)."""
        if text != self.text:
            self.text = text
            self.query_one(Static).update(text)


class ConvList(ListView):
    """The conversation list. A printable key typed here is handed to the composer
    (`composer_id`) with the focus, so text typed with the list focused is not lost."""

    def __init__(self, *, composer_id: str, **kw) -> None:
        super().__init__(**kw)
        self._composer_id = composer_id

    def on_key(self, event: events.Key) -> None:
        """A printable key: focus the composer and type it there. A key of the same burst
        that reached the list after the focus had moved (Textual routes a key to the widget
        focused when the app reads it) is the composer's: Enter submits, Ctrl+J a new line."""
        composer = self.app.query_one(f"#{self._composer_id}", Composer)
        moved = self.screen.focused is composer
        if event.is_printable and event.character:
            event.stop()
            event.prevent_default()
            # at once, not `focus()` (deferred): the keys of a burst already queued behind
            # this one, and its Enter, must reach the composer, not the list
            self.screen.set_focus(composer)
            composer.insert(event.character)
        elif moved and event.key in ("enter", "ctrl+j"):
            # the list's own Enter would open the highlighted chat (or be dropped once the
            # composer has the focus): the text typed would stay unsent, or go elsewhere
            event.stop()
            event.prevent_default()
            composer.submit() if event.key == "enter" else composer.insert("\n")
