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

from qim.sdk.model import Conversation


class Composer(TextArea):
    """Multi-line input: Enter submits, Ctrl+J inserts a newline. The text stays until
    the app accepted it (`clear()`): a refused command or send keeps what was typed."""

    class Submitted(Message):
        """Posted when the person presses Enter: the text typed (a message or a /command)."""
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            if self.text.strip():
                self.post_message(self.Submitted(self.text))
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
        """A printable key: focus the composer and type it there."""
        if event.is_printable and event.character:
            event.stop()
            event.prevent_default()
            composer = self.app.query_one(f"#{self._composer_id}", Composer)
            composer.focus()
            composer.insert(event.character)
