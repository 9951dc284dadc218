"""/attach and /save of qim-desktop (issue 40; docs/desktop.md "Commands"; docs/sdk.md "Media").

`/attach PATH` uploads a file to the MediaService with the device's token (qim.sdk
`send_media`: the service checks it, strips image metadata and signs a reference) and
sends it to the open chat as a MEDIA message (the SDK keeps the send in its store until it
is handed on, so an attachment cut by quitting is finished at the next start: `resume`); the notice line tells the upload's
progress in steps of a tenth. `/save [N] PATH` downloads the N-th newest media message
shown (default the newest), checked against its reference's SHA-256, to PATH (a
directory: the file's own name inside it). The MediaService's address is --media-url
(or $QIM_MEDIA_URL). Every refusal is a ValueError whose message is the one line the
person reads (actions.py shows it as a refusal and keeps the typed text).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from qim.consts import MESSAGE_TYPE_MEDIA
from qim.desktop import render
from qim.sdk.media import MediaRefused, MediaUnavailable
from qim.wire.media import BadMediaRef, decode_ref

ChatApp = Any  # qim/desktop/app.py's ChatApp (typed loosely: it imports actions, which imports this)
NO_SERVICE = "no media service: start qim-desktop with --media-url URL (or $QIM_MEDIA_URL)"


def _refusal(verb: str, exc: MediaRefused) -> ValueError:
    return ValueError(f"{verb} refused by the media service ({exc.status}): {exc.reason}")


async def attach(app: ChatApp, conv: Any, path_text: str) -> str:
    """Upload the file at `path_text` and send it to `conv` (a Conversation); the
    notice line after it ("sent photo.jpg (1.2 MB)"). ValueError: no service, no such
    file, or the service's refusal with its status and reason."""
    c = app.client
    if not c.media_url:
        raise ValueError(NO_SERVICE)
    path, size = await asyncio.to_thread(_file, path_text)
    told = [-1]

    def progress(sent: int, total: int) -> None:
        tenth = sent * 10 // max(total, 1)
        if tenth != told[0]:  # one notice per tenth: a line per 64 KiB chunk would flood the screen
            told[0] = tenth
            app.tell(f"uploading {path.name}: {tenth * 10}% of {render.size_words(total)}")

    try:
        await c.send_media(conv.conversation_id, path, progress=progress, wait=False)
    except MediaRefused as exc:
        raise _refusal("/attach", exc) from None
    app.show_chat(scroll_end=True)  # as a text send does: one's own photo in view, even after paging back
    return f"sent {path.name} ({render.size_words(size)})"


def _file(path_text: str) -> tuple[Path, int]:
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise ValueError(f"/attach: no file {path_text!r}" + (" (a directory)" if path.is_dir() else ""))
    return path, path.stat().st_size


def _target(path_text: str, name: str) -> Path:
    path = Path(path_text).expanduser()
    if path.is_dir():
        path = path / name  # the service checked the name holds no path (decision 0138)
    if path.exists():
        raise ValueError(f"/save: {path} exists; give another path")
    if not path.parent.is_dir():
        raise ValueError(f"/save: no directory {str(path.parent)!r}")
    return path


def nth_media(app: ChatApp, nth: int) -> Any:
    """The `nth` newest MEDIA message shown in the open chat (StoredMessage). ValueError
    when there are fewer."""
    media = sorted(
        (m for m in app.shown.values() if m.message_type == MESSAGE_TYPE_MEDIA and m.state == 0),
        key=lambda m: m.conversation_seq,
        reverse=True,
    )
    if len(media) < nth:
        have = "no media message" if not media else f"only {len(media)} media message(s)"
        raise ValueError(f"{have} here to save" + ("" if nth == 1 else f" (asked for the {nth}th newest)"))
    return media[nth - 1]


async def save(app: ChatApp, nth: int, path_text: str) -> str:
    """Download the `nth` newest media message shown to `path_text` (inside it when a
    directory); the notice line after it. ValueError: no service, an existing file
    (never overwritten), a missing directory, or the service's refusal."""
    c = app.client
    if not c.media_url:
        raise ValueError(NO_SERVICE)
    msg = nth_media(app, nth)
    try:
        ref = decode_ref(msg.body)
    except BadMediaRef as exc:
        raise ValueError(f"/save: {exc}") from None
    path = await asyncio.to_thread(_target, path_text, ref.name or ref.media_id)
    try:
        await c.download(msg, path)
    except MediaRefused as exc:
        raise _refusal("/save", exc) from None
    return f"saved {render.media_words(msg.body)} to {path}"


async def resume(app: ChatApp) -> str:
    """Finish the attachments an earlier run left unsent (issue 40: pending media survive
    a restart like pending text; qim.sdk `resume_media`), told on the notice line; the
    line told last ("" when nothing was pending or no service is set). A refusal or a
    vanished file is named, never dropped silently; an unreachable service leaves them
    for the next start."""
    c = app.client
    if not c.media_url or not (pending := await c.pending_media()):
        return ""
    app.tell(f"resuming {len(pending)} unsent attachment(s)…")
    sent, lost = [], []
    for row, outcome in await c.resume_media(wait=False):
        name = row.name or "a file"
        if isinstance(outcome, MediaUnavailable):  # every node away: kept in the store for the next start
            lost.append(f"{name} kept for the next start (the media service did not answer)")
        elif isinstance(outcome, MediaRefused):
            lost.append(f"{name} refused ({outcome.status}): {outcome.reason}")
        elif isinstance(outcome, FileNotFoundError):
            lost.append(f"{name}: its file is gone")
        elif isinstance(outcome, BaseException):
            lost.append(f"{name}: {outcome}")
        else:
            sent.append(name)
    line = f"resumed and sent {', '.join(sent)}" if sent else "no unsent attachment could be sent"
    line += f"; not sent: {'; '.join(lost)}" if lost else ""
    app.tell(line)
    return line
