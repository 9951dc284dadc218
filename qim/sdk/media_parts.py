"""The MediaService's HTTP calls in qim.sdk (issue 40; docs/sdk.md "Media"; docs/decisions/0138,
0147): `upload` (a file through the service), `upload_large` (presigned parts straight to
the object store, resumed after a cut with only the parts the store lacks) and `fetch`
(the original, or one byte range of it).

Every call takes one MediaService URL, a comma-separated list, or a MediaNodes, and
moves on to another node when one fails (qim/sdk/media_http.py). A part PUT to the
store that is cut (reset, closed mid-body, 5xx, an expired URL's 403) is not an error of
the upload: after a jittered backoff the client asks any node which parts the store
holds (`GET /v1/media/uploads/{upload}`) and sends only the others, until the parts are
all there or nothing got through for the retry budget (MediaUnavailable naming the
upload, which `upload_large(resume=...)` or a later run finishes).

A file is read part by part when given as a path (a 200 MB file is never held whole);
bytes are sliced.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Optional, Union

from qim.proto.v1.media_pb2 import MediaRef
from qim.sdk.media_http import (
    RETRY_BUDGET_S,
    MediaNodes,
    MediaRefused,
    MediaUrls,
    Patience,
    Progress,
    Uploaded,
    aiohttp_module,
)
from qim.wire.media import decode_ref, sniff

CHUNK = 64 * 1024
HASH_BYTES = 4 * 1024 * 1024
UPLOADS = "/v1/media/uploads"
Source = Union[bytes, str, os.PathLike]
Token = Union[str, Callable[[], str]]  # a callable is asked at each call (a long upload outlives a token)
Range = tuple[Optional[int], Optional[int]]  # (first, last); (first, None): to the end; (None, n): the last n


class PartSource:
    """The bytes of an upload: `size`, `read(offset, n)`, `sha256()` (hex), `head()` (the
    first 16 bytes, to sniff the type); from bytes or from a file read on demand."""

    def __init__(self, data: Source) -> None:
        if isinstance(data, (bytes, bytearray, memoryview)):
            self._data: Optional[bytes] = bytes(data)
            self.path: Optional[Path] = None
            self.size = len(self._data)
        else:
            self._data, self.path = None, Path(data)
            self.size = self.path.stat().st_size

    def _read(self, offset: int, n: int) -> bytes:
        if self._data is not None:
            return self._data[offset : offset + n]
        assert self.path is not None
        with self.path.open("rb") as f:
            f.seek(offset)
            return f.read(n)

    async def read(self, offset: int, n: int) -> bytes:
        """`n` bytes at `offset` (fewer at the end); a file is read in a worker thread."""
        if self._data is not None:
            return self._read(offset, n)
        return await asyncio.to_thread(self._read, offset, n)

    def _digest(self) -> str:
        digest = hashlib.sha256()
        for offset in range(0, self.size, HASH_BYTES):
            digest.update(self._read(offset, HASH_BYTES))
        return digest.hexdigest()

    async def sha256(self) -> str:
        """The SHA-256 of the whole source, hex."""
        return self._digest() if self._data is not None else await asyncio.to_thread(self._digest)

    async def head(self) -> bytes:
        """The first 16 bytes (enough for qim.wire.media.sniff)."""
        return await self.read(0, 16)


class _Cut(Exception):
    """A part PUT that did not get through for a reason worth a retry (module doc)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _nodes(media_url: Union[MediaUrls, MediaNodes], ssl_context: Any, budget_s: float = RETRY_BUDGET_S) -> MediaNodes:
    return media_url if isinstance(media_url, MediaNodes) else MediaNodes(media_url, ssl_context, budget_s)


def _auth(token: Token) -> dict[str, str]:
    return {"Authorization": f"Bearer {token() if callable(token) else token}"}


def _uploaded(answer: dict) -> Uploaded:
    body = base64.b64decode(answer["ref"])
    return Uploaded(decode_ref(body), body)


async def _chunks(data: bytes, progress: Optional[Progress]) -> AsyncIterator[bytes]:
    for start in range(0, len(data), CHUNK):
        yield data[start : start + CHUNK]
        if progress is not None:
            progress(min(start + CHUNK, len(data)), len(data))


async def upload(
    media_url: Union[MediaUrls, MediaNodes],
    token: Token,
    data: bytes,
    *,
    mime: str = "",
    name: str = "",
    keep_metadata: bool = False,
    progress: Optional[Progress] = None,
    ssl_context: Any = None,
) -> Uploaded:
    """POST `data` to the MediaService (`POST /v1/media`) as the device of `token`;
    `mime` defaults to the type sniffed from the bytes. MediaRefused otherwise."""
    nodes = _nodes(media_url, ssl_context)
    headers = {
        **_auth(token),
        "Content-Type": mime or sniff(data),
        "X-QIM-Size": str(len(data)),
        "X-QIM-SHA256": hashlib.sha256(data).hexdigest(),
        "Content-Length": str(len(data)),
    }
    params = {"name": name, **({"keep_metadata": "1"} if keep_metadata else {})}
    async with nodes.session() as http:
        _, answer = await nodes.request(
            http, "POST", "/v1/media", (201,), params=params, headers=headers, body=lambda: _chunks(data, progress)
        )
    return _uploaded(answer)


async def _status(nodes: MediaNodes, http: Any, token: Token, upload: str, patience: Patience) -> dict:
    _, plan = await nodes.request(http, "GET", f"{UPLOADS}/{upload}", (200,), headers=_auth(token), patience=patience)
    return plan


async def _send_parts(
    http: Any,
    source: PartSource,
    plan: dict,
    progress: Optional[Progress],
    on_part: Optional[Callable[[int], Awaitable[None]]],
    patience: Patience,
) -> None:
    """PUT every part `plan` names (its presigned URLs), in order; _Cut when one does not get through."""
    aiohttp = aiohttp_module()
    part = int(plan["part_bytes"])
    todo = sorted((int(n), url) for n, url in plan["urls"].items())
    sizes = {n: min(part, source.size - (n - 1) * part) for n, _ in todo}
    sent = source.size - sum(sizes.values())  # what the store already holds
    for number, url in todo:
        chunk = await source.read((number - 1) * part, sizes[number])
        try:
            async with http.put(url, data=chunk) as r:  # signed by the URL: no token to the store
                if r.status in (403, 500, 502, 503, 504):  # 403: the URL expired; ask for fresh ones
                    raise _Cut(MediaRefused(r.status, f"part {number}: the store answered {r.status}"))
                if r.status != 200:
                    text = (await r.text()).strip()[:200]
                    raise MediaRefused(r.status, f"upload {plan['upload']}: part {number} refused by the store: {text}")
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, asyncio.TimeoutError) as exc:
            raise _Cut(exc) from exc
        patience.progress()
        sent += len(chunk)
        if on_part is not None:
            await on_part(number)
        if progress is not None:
            progress(sent, source.size)


async def upload_large(
    media_url: Union[MediaUrls, MediaNodes],
    token: Token,
    data: Source,
    *,
    mime: str = "",
    name: str = "",
    resume: str = "",
    progress: Optional[Progress] = None,
    ssl_context: Any = None,
    sha256: str = "",
    on_started: Optional[Callable[[str], Awaitable[None]]] = None,
    on_part: Optional[Callable[[int], Awaitable[None]]] = None,
    budget_s: float = RETRY_BUDGET_S,
) -> Uploaded:
    """Upload `data` (bytes or a file path) in presigned parts (`POST /v1/media/uploads`),
    or finish the upload `resume` started: only the parts the store lacks are sent, and
    a cut part is resumed the same way (module doc). `sha256` (hex) spares hashing a
    file again; `on_started(upload)` is awaited once the upload has its id, `on_part(n)`
    after each part got through. Returns the reference; MediaRefused when the service
    refuses (404: no such upload, e.g. expired: start again), MediaUnavailable (naming
    the upload) when nothing got through for `budget_s` seconds."""
    source = PartSource(data)
    nodes = _nodes(media_url, ssl_context, budget_s)
    patience = Patience(nodes.budget_s, resume)
    async with nodes.session() as http:
        if resume:
            plan = await _status(nodes, http, token, resume, patience)
        else:
            spec = {
                "size": source.size,
                "sha256": sha256 or await source.sha256(),
                "mime": mime or sniff(await source.head()),
                "name": name,
            }
            _, plan = await nodes.request(
                http, "POST", UPLOADS, (201,), json=spec, headers=_auth(token), patience=patience
            )
            if on_started is not None:
                await on_started(plan["upload"])
        upload = patience.upload = plan["upload"]
        while plan["urls"]:
            try:
                await _send_parts(http, source, plan, progress, on_part, patience)
                break
            except _Cut as cut:  # the store lost the part: ask any node what it holds, send the rest
                await patience.wait(cut.cause, f"upload {upload}")
                plan = await _status(nodes, http, token, upload, patience)
        _, answer = await nodes.request(
            http, "POST", f"{UPLOADS}/{upload}/complete", (201,), headers=_auth(token), patience=patience
        )
    return _uploaded(answer)


def range_header(byte_range: Range) -> str:
    """The HTTP Range header of (first, last), (first, None) or (None, n) (last n bytes);
    ValueError for anything else."""
    first, last = byte_range
    if first is None and last is not None and last > 0:
        return f"bytes=-{last}"
    if first is not None and first >= 0 and (last is None or last >= first):
        return f"bytes={first}-{'' if last is None else last}"
    raise ValueError(f"not a byte range: {byte_range!r}")


async def fetch(
    media_url: Union[MediaUrls, MediaNodes],
    token: Token,
    ref: MediaRef,
    conversation_id: bytes,
    message_id: bytes,
    peer: int = 0,
    byte_range: Optional[Range] = None,
    ssl_context: Any = None,
) -> bytes:
    """GET the original of `ref` through message `message_id` of `conversation_id`
    (`peer`: a direct conversation's other participant), or one byte range of it (see
    `range_header`); the whole original is checked against ref.sha256. MediaRefused
    otherwise (416: a range outside the object)."""
    nodes = _nodes(media_url, ssl_context)
    headers = _auth(token)
    if byte_range is not None:
        headers["Range"] = range_header(byte_range)
    params = {"conversation": conversation_id.hex(), "message": message_id.hex(), "peer": str(peer)}
    async with nodes.session() as http:
        _, data = await nodes.request(
            http, "GET", f"/v1/media/{ref.media_id}", (200, 206), read="bytes", params=params, headers=headers
        )
    data = bytes(data)
    if byte_range is None and hashlib.sha256(data).digest() != ref.sha256:
        raise MediaRefused(502, "the downloaded bytes do not match the reference's SHA-256")
    return data
