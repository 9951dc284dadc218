"""Photos, voice notes and files in qim.sdk (issue 40; docs/sdk.md "Media"; docs/decisions/0138, 0147).

`client.send_media(conversation_id, path_or_bytes, progress=cb)` uploads the file to the
MediaService (with the client's device token), which checks it, strips image metadata,
stores it and answers a signed reference; the reference is then sent as a MEDIA message
like any send (pending, acknowledged, resent with the same client_message_id after a
cut). `client.download(message)` fetches the original of a received MEDIA message
(or one byte range of it), checks its SHA-256 against the reference and returns the
bytes (and writes them to `path` when given).

The service's address: `client.media_urls` (several nodes, tried in order, moving on
when one fails: qim/sdk/media_http.py), or `client.media_url` (one, or a
comma-separated list as in $QIM_MEDIA_URL). Files up to LARGE_BYTES and images go
through the service (`POST /v1/media`); larger ones in presigned parts straight to the
object store (qim/sdk/media_parts.py), resumed after a cut with only the missing parts.

A media send is recorded in the LocalStore before its upload starts and survives an app
restart: `client.resume_media()` on a later Client of the same store finishes the upload
and sends the message once, with the client_message_id reserved at the first try
(qim/sdk/media_outbox.py); `client.pending_media()` lists them.

Refusals are MediaRefused with the HTTP status and the service's one-line reason (413
too large, 415 not an allowed type or not its declared type, 422 too many pixels, 429
the daily quota, 403 not a member, 404 not a message the user can see, 410 recalled or
deleted); MediaUnavailable (503) when no node answered for the retry budget (the send
stays pending). Needs aiohttp (`pip install 'qim[server]'` or aiohttp itself).
"""

from __future__ import annotations

import asyncio
import os
import ssl
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from qim._core import ids
from qim.consts import CONVERSATION_KIND_DIRECT, CONVERSATION_KIND_GROUP, MESSAGE_TYPE_MEDIA
from qim.errors import ErrorCode, IdError
from qim.sdk.events import NotConnected, SendRefused
from qim.sdk.media_http import MediaNodes, MediaRefused, MediaUnavailable, Progress, Uploaded
from qim.sdk.media_outbox import MediaOutbox, PendingMedia
from qim.sdk.media_parts import CHUNK, PartSource, Range, fetch, upload, upload_large
from qim.wire.media import decode_ref, sniff

__all__ = [
    "MediaCalls",
    "MediaRefused",
    "MediaUnavailable",
    "Uploaded",
    "upload",
    "upload_large",
    "fetch",
    "CHUNK",
    "Progress",
    "IMAGE_TYPES",
    "LARGE_BYTES",
    "PendingMedia",
]

IMAGE_TYPES = ("image/jpeg", "image/png", "image/webp", "image/gif")  # always through the service
LARGE_BYTES = 16 * 1024 * 1024  # the MediaService's default through-the-service limit


class MediaCalls:
    """`send_media`, `resume_media`, `pending_media` and `download` on the Client (module
    doc). `media_url` / `media_urls`: the MediaService's base URLs, set by the app;
    `media_ssl`: the TLS context to verify them (None: the system's CAs)."""

    media_url: Optional[str] = None
    media_urls: Sequence[str] = ()
    media_ssl: Optional[ssl.SSLContext] = None
    runtime: Any
    store: Any
    store_path: str
    _media_nodes: Optional[MediaNodes] = None
    _media_outbox: Optional[MediaOutbox] = None

    def _media(self) -> MediaNodes:
        """The MediaNodes of the configured URLs (kept while they do not change, so the
        node that answered last is asked first). ValueError when none is set."""
        urls = tuple(self.media_urls) or (self.media_url or "")
        nodes = self._media_nodes
        if nodes is None or nodes.ssl_context is not self.media_ssl or nodes.urls != MediaNodes(urls).urls:
            nodes = self._media_nodes = MediaNodes(urls, self.media_ssl)
        return nodes

    def _outbox(self) -> MediaOutbox:
        if self._media_outbox is None:
            self._media_outbox = MediaOutbox(self.store, self.store_path)
        return self._media_outbox

    def _token(self) -> str:
        return str(self.runtime.tokens.token)  # asked at each request: a long upload may see it refreshed

    async def _recipient(self, conv: bytes) -> int:
        try:
            kind = ids.conversation_kind(conv)
        except IdError as exc:
            raise SendRefused(ErrorCode.INVALID_ARGUMENT, f"not a conversation_id: {exc}") from None
        if kind == CONVERSATION_KIND_GROUP:
            return 0
        peer = int(await self.store.run(self.store.peer_of, conv))
        if not peer:
            raise SendRefused(ErrorCode.INVALID_ARGUMENT, "unknown peer: open_direct(peer_user_id) first")
        return peer

    async def send_media(
        self,
        conversation_id: bytes,
        file: Union[bytes, str, os.PathLike],
        *,
        mime: str = "",
        name: str = "",
        keep_metadata: bool = False,
        progress: Optional[Progress] = None,
        wait: bool = True,
    ) -> Any:
        """Upload `file` (bytes, or a path: its name is sent unless `name` says another)
        and send its reference as a MEDIA message; returns the SendAck with `wait`, else
        the client_message_id. The send is recorded first and resumable after a restart
        (module doc). MediaRefused for a refused upload (the record is dropped),
        MediaUnavailable when no node answered (the record stays: `resume_media`),
        SendRefused (unknown peer), FileNotFoundError; the send's own errors as `send`."""
        conv = bytes(conversation_id)
        recipient = await self._recipient(conv)
        self._media()  # ValueError before anything is recorded
        outbox = self._outbox()
        cmid = await outbox.run(outbox.reserve)
        path: Optional[Path]
        if isinstance(file, (str, os.PathLike)):
            # absolute: a later run may have another working directory
            path, spooled = Path(await asyncio.to_thread(os.path.abspath, os.fspath(file))), False
            source = await asyncio.to_thread(PartSource, file)  # stat(): FileNotFoundError here
            name = name or path.name
        else:
            data, spool = bytes(file), outbox.spool_dir()
            source, spooled = PartSource(data), spool is not None
            path = spool / cmid.hex() if spool is not None else None
            if path is not None:  # bytes must outlive the app to be resumed: a copy beside the store
                await asyncio.to_thread(_write_spool, path, data)
        row = PendingMedia(
            cmid,
            conv,
            recipient,
            str(path or ""),
            spooled,
            source.size,
            await source.sha256(),
            mime,
            name,
            keep_metadata,
        )
        if path is not None:
            await outbox.run(outbox.add, row)
        return await self._finish_media(row, source, progress, wait)

    async def _finish_media(
        self, row: PendingMedia, source: PartSource, progress: Optional[Progress], wait: bool
    ) -> Any:
        """Upload `row` (unless it has its reference), then hand the MEDIA message to the
        sender with the reserved client_message_id and drop the row."""
        outbox, cmid = self._outbox(), row.client_message_id
        body = row.ref
        if not body:
            try:
                body = await self._upload_row(row, source, progress)
            except MediaUnavailable:
                raise  # kept: a later resume_media finishes it
            except MediaRefused:
                await outbox.run(outbox.remove, cmid)
                raise
        if wait and self.runtime.core.closing:  # as send(): without wait it goes after the next connect()
            raise NotConnected("call connect() first (the upload is done and recorded; resume_media sends it)")
        if await outbox.run(outbox.pending_state, cmid) is not None:
            # an earlier run handed it to the sender and died before dropping the row: the
            # pending send is the sender's (its outcome comes as events), nothing to wait for here
            await outbox.run(outbox.remove, cmid)
            return cmid
        await self.runtime.submit_message(
            row.conversation_id, row.recipient_user_id, body, MESSAGE_TYPE_MEDIA, b"", b"", cmid
        )
        await outbox.run(outbox.remove, cmid)
        return await self.runtime.wait_ack(cmid) if wait else cmid

    async def _upload_row(self, row: PendingMedia, source: PartSource, progress: Optional[Progress]) -> bytes:
        outbox, cmid = self._outbox(), row.client_message_id
        if source.size > LARGE_BYTES and sniff(await source.head()) not in IMAGE_TYPES:  # images pass the service

            async def started(upload: str) -> None:
                await outbox.run(outbox.started, cmid, upload)

            async def part(_: int) -> None:
                await outbox.run(outbox.part_done, cmid)

            async def go(resume: str) -> Uploaded:
                whole = source.path or await source.read(0, source.size)
                return await upload_large(
                    self._media(),
                    self._token,
                    whole,
                    mime=row.mime,
                    name=row.name,
                    resume=resume,
                    progress=progress,
                    sha256=row.sha256,
                    on_started=started,
                    on_part=part,
                )

            try:
                up = await go(row.upload)
            except MediaRefused as exc:
                if exc.status != 404 or not row.upload:
                    raise
                up = await go("")  # the service forgot the upload (expired, or completed unseen): again
        else:
            up = await upload(
                self._media(),
                self._token,
                await source.read(0, source.size),
                mime=row.mime,
                name=row.name,
                keep_metadata=row.keep_metadata,
                progress=progress,
            )
        await outbox.run(outbox.uploaded, cmid, up.body)
        return up.body

    async def pending_media(self) -> list[PendingMedia]:
        """The media sends this store has not handed to the sender yet (oldest first)."""
        outbox = self._outbox()
        return list(await outbox.run(outbox.rows))

    async def resume_media(
        self, progress: Optional[Progress] = None, wait: bool = True
    ) -> list[tuple[PendingMedia, Any]]:
        """Finish every pending media send of this store (an earlier run's, cut by a
        restart): (row, outcome) each, the outcome the SendAck (the client_message_id
        without `wait`, or when an earlier run had already handed the send to the sender:
        its outcome comes as events) or the exception that ended it: MediaRefused (dropped),
        FileNotFoundError (its file is gone: dropped), MediaUnavailable (kept for a
        later call). Needs media_url(s) set and, to send, connect()."""
        outbox, out = self._outbox(), []  # type: MediaOutbox, list[tuple[PendingMedia, Any]]
        for row in await self.pending_media():
            try:
                source = await asyncio.to_thread(PartSource, row.path)
            except FileNotFoundError as exc:
                await outbox.run(outbox.remove, row.client_message_id)
                out.append((row, exc))
                continue
            try:
                out.append((row, await self._finish_media(row, source, progress, wait)))
            except MediaRefused as exc:  # told to the app in the result, never dropped silently
                out.append((row, exc))
        return out

    async def download(
        self, message: Any, path: Union[str, os.PathLike, None] = None, byte_range: Optional[Range] = None
    ) -> bytes:
        """The original of a MEDIA `message` (a StoredMessage), checked against its
        reference's SHA-256, also written to `path` when given; or only `byte_range`
        ((first, last), (first, None) to the end, (None, n) the last n bytes; not
        checked, not written). ValueError for a message that is not MEDIA; MediaRefused
        when the service refuses (416: a range outside the file), and 410 without a request
        for a message stored as recalled or deleted (state 1 or 2)."""
        if message.message_type != MESSAGE_TYPE_MEDIA:
            raise ValueError("not a MEDIA message")
        if message.state != 0 or not message.body:
            # its body, the reference, is gone: a request would ask for no media id (a bare 404)
            raise MediaRefused(410, "the message was recalled or deleted: its media is no longer served")
        ref = decode_ref(message.body)
        conv = bytes(message.conversation_id)
        peer = 0
        if ids.conversation_kind(conv) == CONVERSATION_KIND_DIRECT:
            peer = await self.store.run(self.store.peer_of, conv)
        data = await fetch(
            self._media(), self._token, ref, conv, bytes(message.message_id), peer, byte_range=byte_range
        )
        if path is not None and byte_range is None:
            await asyncio.to_thread(Path(path).write_bytes, data)
        return data


def _write_spool(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
