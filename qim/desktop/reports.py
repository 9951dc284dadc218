"""`/report [N] REASON [TEXT]` in qim-desktop (docs/desktop.md; docs/decisions/0124): the
N-th newest message shown in the open chat (1: the newest) is reported to the
deployment's operator through `Client.report` (qim/sdk/reports.py) with REASON (spam,
abuse, illegal, other) and the rest of the line as free text; nobody in the chat is told.
"""

from __future__ import annotations

from typing import Any

from qim.desktop import render
from qim.sdk.model import Conversation, StoredMessage

ChatApp = Any  # qim/desktop/app.py's ChatApp (typed loosely: that module imports this one)
CONTROL = 4  # MessageType CONTROL: notices are not reported


async def run(app: ChatApp, conv: Conversation, nth: int, words: str) -> str:
    """Report the `nth` newest message shown; the notice line. ValueError when there is
    no such message or the SDK refuses the text (over 1,000 bytes)."""
    reason, _, text = words.partition(" ")
    shown: list[StoredMessage] = sorted(
        (m for m in app.shown.values() if m.state == 0 and m.message_type != CONTROL),
        key=lambda m: m.conversation_seq,
        reverse=True,
    )
    if len(shown) < nth:
        raise ValueError(f"only {len(shown)} message(s) here to report" if shown else "no message here to report")
    target = shown[nth - 1]
    done = await app.client.report(conv.conversation_id, target.message_id, reason, text.strip())
    what = render.cut(render.body_text(target.message_type, target.custom_type, target.body, 0), 40)
    return f'reported "{what}" to the operator as {reason} (report {done.report_id})'
