"""Photos, voice notes and files in qim.sdk (issue 40; docs/sdk.md "Media"; docs/decisions/0138).

`client.send_media(conversation_id, path_or_bytes, progress=cb)` uploads the file to the
MediaService (`POST /v1/media` at `client.media_url`, with the client's device token),
which checks it, strips image metadata, stores it and answers a signed reference; the
reference is then sent as a MEDIA message like any send (pending, acknowledged,
resent with the same client_message_id after a cut). `client.download(message)` fetches
the original of a received MEDIA message, checks its SHA-256 against the reference and
returns the bytes (and writes them to `path` when given).

Refusals are MediaRefused with the HTTP status and the service's one-line reason (413
too large, 415 not an allowed type or not its declared type, 422 too many pixels, 429
the daily quota, 403 not a member, 404 not a message the user can see, 410 recalled or
deleted). Needs aiohttp (`pip install 'qim[server]'` or aiohttp itself).

Large files (above LARGE_BYTES) go in presigned parts straight to the object store
(`upload_large`, resumable by its upload id after a cut). Not yet: an upload does not
survive an app restart by itself (the send after it does).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Optional, Union

from qim._core import ids
from qim.consts import CONVERSATION_KIND_DIRECT, MESSAGE_TYPE_MEDIA
from qim.proto.v1.media_pb2 import MediaRef
from qim.wire.media import decode_ref, sniff

IMAGE_TYPES = ("image/jpeg", "image/png", "image/webp", "image/gif")  # always through the service
Progress = Callable[[int, int], None]  # (bytes sent, bytes in all)
CHUNK = 64 * 1024
LARGE_BYTES = 16 * 1024 * 1024  # the MediaService's default through-the-service limit


class MediaRefused(Exception):
    """The MediaService refused an upload or a download: `status` (HTTP) and `reason`
    (its one-line explanation, safe to show)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status}: {reason}")
        self.status, self.reason = status, reason


@dataclass(frozen=True)
class Uploaded:
    """The MediaService's answer: `ref` (the signed MediaRef, sent as the MEDIA body) and
    `body` (its serialized bytes)."""

    ref: MediaRef
    body: bytes


def _aiohttp() -> Any:
    try:
        import aiohttp
    except ImportError:
        raise RuntimeError("media needs aiohttp: pip install 'qim[server]' (or aiohttp)") from None
    return aiohttp


async def _chunks(data: bytes, progress: Optional[Progress]) -> AsyncIterator[bytes]:
    for start in range(0, len(data), CHUNK):
        yield data[start : start + CHUNK]
        if progress is not None:
            progress(min(start + CHUNK, len(data)), len(data))


async def upload(
    media_url: str,
    token: str,
    data: bytes,
    *,
    mime: str = "",
    name: str = "",
    keep_metadata: bool = False,
    progress: Optional[Progress] = None,
    ssl_context: Optional[ssl.SSLContext] = None,
) -> Uploaded:
    """POST `data` to the MediaService at `media_url` (its base URL) as the device of
    `token`; `mime` defaults to the type sniffed from the bytes. MediaRefused otherwise."""
    aiohttp = _aiohttp()
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": mime or sniff(data),
        "X-QIM-Size": str(len(data)),
        "X-QIM-SHA256": hashlib.sha256(data).hexdigest(),
        "Content-Length": str(len(data)),
    }
    params = {"name": name, **({"keep_metadata": "1"} if keep_metadata else {})}
    async with aiohttp.ClientSession() as http:
        async with http.post(
            media_url.rstrip("/") + "/v1/media",
            data=_chunks(data, progress),
            params=params,
            headers=headers,
            ssl=ssl_context if ssl_context is not None else True,
        ) as r:
            if r.status != 201:
                raise MediaRefused(r.status, (await r.text()).strip())
            answer = await r.json()
    body = base64.b64decode(answer["ref"])
    return Uploaded(decode_ref(body), body)


async def upload_large(
    media_url: str,
    token: str,
    data: bytes,
    *,
    mime: str = "",
    name: str = "",
    resume: str = "",
    progress: Optional[Progress] = None,
    ssl_context: Optional[ssl.SSLContext] = None,
) -> Uploaded:
    """Upload `data` in presigned parts (POST /v1/media/uploads), or finish the upload
    `resume` started before a cut: only the parts the store lacks are sent. Returns the
    reference; MediaRefused when the service refuses (the upload id is in the message of
    a refusal after the start, so the app can resume it)."""
    aiohttp = _aiohttp()
    auth = {"Authorization": f"Bearer {token}"}
    base = media_url.rstrip("/") + "/v1/media/uploads"
    tls = ssl_context if ssl_context is not None else True
    async with aiohttp.ClientSession() as http:
        if resume:
            async with http.get(f"{base}/{resume}", headers=auth, ssl=tls) as r:
                if r.status != 200:
                    raise MediaRefused(r.status, (await r.text()).strip())
                plan = await r.json()
        else:
            spec = {
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "mime": mime or sniff(data),
                "name": name,
            }
            async with http.post(base, json=spec, headers=auth, ssl=tls) as r:
                if r.status != 201:
                    raise MediaRefused(r.status, (await r.text()).strip())
                plan = await r.json()
        part = int(plan["part_bytes"])
        todo = [(int(n), url) for n, url in sorted(plan["urls"].items(), key=lambda kv: int(kv[0]))]
        chunks = {n: data[(n - 1) * part : n * part] for n, _ in todo}
        sent = len(data) - sum(len(c) for c in chunks.values())  # what the store already holds
        for number, url in todo:
            async with http.put(url, data=chunks[number]) as r:  # signed by the URL: no token to the store
                if r.status != 200:
                    raise MediaRefused(r.status, f"upload {plan['upload']}: part {number} refused by the store")
            sent += len(chunks[number])
            if progress is not None:
                progress(sent, len(data))
        async with http.post(f"{base}/{plan['upload']}/complete", headers=auth, ssl=tls) as r:
            if r.status != 201:
                raise MediaRefused(r.status, (await r.text()).strip())
            answer = await r.json()
    body = base64.b64decode(answer["ref"])
    return Uploaded(decode_ref(body), body)


async def fetch(
    media_url: str,
    token: str,
    ref: MediaRef,
    conversation_id: bytes,
    message_id: bytes,
    peer: int = 0,
    byte_range: Optional[tuple[int, int]] = None,
    ssl_context: Optional[ssl.SSLContext] = None,
) -> bytes:
    """GET the original of `ref` through message `message_id` of `conversation_id`
    (`peer`: a direct conversation's other participant), or bytes first..last of it;
    the whole original is checked against ref.sha256. MediaRefused otherwise."""
    aiohttp = _aiohttp()
    headers = {"Authorization": f"Bearer {token}"}
    if byte_range is not None:
        headers["Range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
    params = {"conversation": conversation_id.hex(), "message": message_id.hex(), "peer": str(peer)}
    async with aiohttp.ClientSession() as http:
        async with http.get(
            f"{media_url.rstrip('/')}/v1/media/{ref.media_id}",
            params=params,
            headers=headers,
            ssl=ssl_context if ssl_context is not None else True,
        ) as r:
            if r.status not in (200, 206):
                raise MediaRefused(r.status, (await r.text()).strip())
            data = bytes(await r.read())
    if byte_range is None and hashlib.sha256(data).digest() != ref.sha256:
        raise MediaRefused(502, "the downloaded bytes do not match the reference's SHA-256")
    return data


class MediaCalls:
    """`send_media` and `download` on the Client (module doc). `media_url`: the
    MediaService's base URL (https://host:port), set by the app; `media_ssl`: the TLS
    context to verify it (None: the system's CAs)."""

    media_url: Optional[str] = None
    media_ssl: Optional[ssl.SSLContext] = None
    runtime: Any
    store: Any

    def _media(self) -> str:
        if not self.media_url:
            raise ValueError("set client.media_url to the MediaService's address first")
        return self.media_url

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
        and send its reference as a MEDIA message; returns what `send` returns (the
        SendAck with `wait`). MediaRefused for a refused upload; the send's own errors
        as `send`."""
        if isinstance(file, (str, os.PathLike)):
            path = Path(file)
            data, name = await asyncio.to_thread(path.read_bytes), name or path.name
        else:
            data = bytes(file)
        token = self.runtime.tokens.token
        if len(data) > LARGE_BYTES and sniff(data) not in IMAGE_TYPES:  # images always pass the service
            up = await upload_large(
                self._media(), token, data, mime=mime, name=name, progress=progress, ssl_context=self.media_ssl
            )
        else:
            up = await upload(
                self._media(),
                token,
                data,
                mime=mime,
                name=name,
                keep_metadata=keep_metadata,
                progress=progress,
                ssl_context=self.media_ssl,
            )
        send: Any = self.send  # type: ignore[attr-defined]  # the Client's
        return await send(conversation_id, up.body, MESSAGE_TYPE_MEDIA, b"", wait)

    async def download(self, message: Any, path: Union[str, os.PathLike, None] = None) -> bytes:
        """The original of a MEDIA `message` (a StoredMessage), checked against its
        reference's SHA-256, also written to `path` when given. ValueError for a message
        that is not MEDIA; MediaRefused when the service refuses."""
        if message.message_type != MESSAGE_TYPE_MEDIA:
            raise ValueError("not a MEDIA message")
        ref = decode_ref(message.body)
        conv = bytes(message.conversation_id)
        peer = 0
        if ids.conversation_kind(conv) == CONVERSATION_KIND_DIRECT:
            peer = await self.store.run(self.store.peer_of, conv)
        data = await fetch(
            self._media(),
            self.runtime.tokens.token,
            ref,
            conv,
            bytes(message.message_id),
            peer,
            ssl_context=self.media_ssl,
        )
        if path is not None:
            await asyncio.to_thread(Path(path).write_bytes, data)
        return data
