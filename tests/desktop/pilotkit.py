"""Driving qim-desktop's composer under Textual's pilot, shared by the desktop tests."""

from __future__ import annotations

from typing import Any

from qim.desktop.app import ChatApp
from qim.desktop.widgets import Composer


async def enter(pilot: Any, app: ChatApp, text: str) -> None:
    """Type `text` into the composer (cleared first) and press Enter."""
    composer = app.query_one(Composer)
    composer.focus()
    composer.clear()
    composer.insert(text)
    await pilot.press("enter")
