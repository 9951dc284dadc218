"""Reactions and typing in qim-desktop (docs/desktop.md; the SDK side is
qim/sdk/reactions.py, docs/decisions/0121): `/react EMOJI [N]` adds EMOJI to the N-th
newest message of the open chat (1: the newest), `/unreact EMOJI [N]` takes it away;
every message with reactions shows them on a line under it ("👍 2 ❤️ 1", yours in
brackets: "[👍 2]"), kept current by the live events and read again with the chat's
newest page when it is opened. Typing in the composer tells the chat's other members
(at most one every 2 s), and the header reads "Bob is typing…" while someone is.
"""

from __future__ import annotations

from typing import Any

from qim.desktop import render
from qim.sdk.model import Conversation, StoredMessage
from qim.sdk.reactions import ReactionsChanged, ReactionSummary, TypingChanged

COMMANDS = ("react", "unreact")
ChatApp = Any  # qim/desktop/app.py's ChatApp (typed loosely: that module imports this one)


def line(summary: ReactionSummary | None) -> str:
    """The reactions line under a message ("" for none): emoji and count, yours bracketed."""
    if summary is None:
        return ""
    return " ".join(f"[{e} {n}]" if mine else f"{e} {n}" for e, n, mine in summary.counts)


async def load(app: ChatApp) -> None:
    """The open chat's reactions (one history page: the newest messages); offline: none."""
    if app.current is None:
        return
    try:
        page = await app.client.reactions.summaries(app.current)
        # the SDK's newest (highest version: docs/sdk.md) over a page an event overtook
        app.reactions.update({mid: app.client.reactions.known(mid) or s for mid, s in page.items()})
    except (ConnectionError, OSError):  # offline: the live events fill them in later
        return
    except Exception as exc:  # noqa: BLE001 — shown, never fatal (NotConnected, ServerError)
        app.tell(f"reactions not loaded: {exc}")


def on_event(app: ChatApp, e: ReactionsChanged | TypingChanged) -> None:
    """A live reaction (redraw the open chat) or typing change (redraw the header)."""
    if isinstance(e, ReactionsChanged):
        app.reactions[e.message_id] = e.summary
        if e.conversation_id == app.current and e.message_id in app.shown:
            app.show_chat()
    elif e.conversation_id == app.current:
        app.show_title()


def typing_words(app: ChatApp) -> str:
    """' · Bob is typing…' for the open chat ("" when nobody is)."""
    if app.current is None:
        return ""
    who = [render.person(u, app.names) for u in app.client.reactions.typing_in(app.current)]
    if not who:
        return ""
    return f" · {', '.join(who)} {'is' if len(who) == 1 else 'are'} typing…"


async def typed(app: ChatApp) -> None:
    """The person typed in the composer: tell the open chat (the SDK sends at most one per 2 s)."""
    if app.current is None or app.room is not None or not app.online:
        return
    try:
        await app.client.reactions.typing(app.current)
    except Exception:  # noqa: BLE001 — best effort: typing is never worth a refusal line
        return


async def run(app: ChatApp, conv: Conversation, name: str, emoji: str, nth: int) -> str:
    """`/react` or `/unreact` on the `nth` newest message shown; the notice line."""
    shown: list[StoredMessage] = sorted((m for m in app.shown.values() if m.state == 0 and m.message_type != 4),
                                        key=lambda m: m.conversation_seq, reverse=True)
    if len(shown) < nth:
        raise ValueError(f"only {len(shown)} message(s) here to react to" if shown else "no message here to react to")
    target = shown[nth - 1]
    act = app.client.reactions.remove if name == "unreact" else app.client.reactions.add
    summary = await act(conv.conversation_id, target.message_id, emoji)
    # a later change's event may have come first: draw the SDK's newest (docs/sdk.md)
    app.reactions[target.message_id] = app.client.reactions.known(target.message_id) or summary
    app.show_chat()
    what = render.cut(render.body_text(target.message_type, target.custom_type, target.body, 0), 40)
    return f"{'removed' if name == 'unreact' else 'reacted'} {emoji} on \"{what}\": {line(summary) or 'no reactions'}"
