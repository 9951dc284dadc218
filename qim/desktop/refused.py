"""A message refused for good after it left the composer (docs/desktop.md "Commands").

With a send policy (ERROR POLICY_REFUSED, docs/decisions/0099) a text is refused by the
server after the composer was emptied: the SDK marks its pending row `failed`, keeps the
body and emits SendFailed. What a person chatting expects, and what this does: the text
goes back into the composer to be edited, when the composer is empty (nothing typed
since is touched); otherwise `/edit` puts it back (the newest refused text not taken
back yet). The reason stays visible on the failed row ("(failed: POLICY_REFUSED: spam
is not welcome here)") and in the notice line, and nothing is sent again by itself: a
new Enter sends the edited text as a new message. A send that failed for a transient
reason is still the SDK's to retry (no SendFailed), so it never comes here.
"""

from __future__ import annotations

from typing import Any, Optional

from qim.consts import MESSAGE_TYPE_TEXT
from qim.desktop.widgets import Composer
from qim.sdk import events as ev

ChatApp = Any  # qim/desktop/app.py's ChatApp (typed loosely: that module imports this one)


class Refusals:
    """The refused sends this app saw: cmid -> "CODE: reason", and which texts are
    still to be taken back by /edit (oldest first)."""

    def __init__(self) -> None:
        self.why: dict[bytes, str] = {}
        self.to_edit: list[tuple[bytes, str]] = []  # (cmid, text) not put back yet


async def on_send_failed(app: ChatApp, e: ev.SendFailed) -> None:
    """Show a refusal: the text back into an empty composer, or offered through /edit."""
    refusals: Refusals = app.refusals
    why = f"{e.code.name}: {e.message}"
    refusals.why[e.client_message_id] = why
    text = await _text_of(app, e.client_message_id)
    if text is None or app.leaving:  # not a text (a custom message): nothing to edit
        app.tell(f"a message was refused: {why}")
        return
    composer = app.query_one(Composer)
    if not composer.text.strip():
        composer.restore(text)
        app.tell(f"a message was refused: {why} · its text is back in the composer to edit")
        return
    refusals.to_edit.append((e.client_message_id, text))
    app.tell(f"a message was refused: {why} · /edit puts its text back in the composer")


async def _text_of(app: ChatApp, cmid: bytes) -> Optional[str]:
    for row in await app.client.unsent():
        if row.client_message_id == cmid and row.message_type == MESSAGE_TYPE_TEXT:
            return row.body.decode("utf-8", "replace")
    return None


def edit(app: ChatApp) -> bool:
    """What /edit does: the newest refused text not taken back goes into the composer,
    before anything typed since; False when there is none."""
    refusals: Refusals = app.refusals
    if not refusals.to_edit:
        return False
    cmid, text = refusals.to_edit.pop()
    app.query_one(Composer).restore(text)
    app.tell(f"refused ({refusals.why[cmid]}): its text is back in the composer to edit")
    return True


def row_words(app: ChatApp, cmid: bytes) -> str:
    """What a failed row says after "(failed": ": CODE: reason" (and "· /edit" while its
    text waits to be taken back), or "" for a refusal this app did not see (an earlier run)."""
    refusals: Refusals = app.refusals
    why = refusals.why.get(cmid)
    if why is None:
        return ""
    waiting = any(c == cmid for c, _ in refusals.to_edit)
    return f": {why}" + (" · /edit" if waiting else "")
