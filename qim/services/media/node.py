"""MediaNode: the qim-media process, the MediaService (issue 40; docs/decisions/0137,
0138). Stateless: the objects are in the S3 store, the quota counters and object records
in Redis (qim/stores/media.py), so any number of nodes serve side by side and a client
may use any of them.

Routes (the `http` column of its row in qim/topology.py, on the node's HTTP listener, QIM_MEDIA_METRICS_LISTEN; device tokens as
the gateway's AUTH, qim/obs/httpauth.py):
- `POST /v1/media` (body: the file; Content-Type: its declared type; X-QIM-Size and
  X-QIM-SHA256: its declared size and SHA-256 hex; `?name=` its file name, optional;
  `?keep_metadata=1` keeps EXIF): checked (qim/services/media/inspect.py), charged to
  the user's quota of the UTC day, stored under `o/<media_id>` (128 random bits: nothing
  from the client), recorded; 201 with the reference as JSON {media_id, mime, size,
  width, height, sha256, name, thumbnail (base64 WebP), ref (base64 MediaRef: the MEDIA
  message body, signed)}.
- `GET /v1/media/{media_id}?conversation=<hex>&message=<hex>[&peer=<user id>]`: the
  original, to a member who may see that message (qim/services/media/access.py), with
  HTTP Range (206, 416).
- Large files: presigned multipart uploads, resumable (qim/services/media/multipart.py).
Refusals are a status with a one-line reason (MediaRefused); nothing is stored for a
refused upload.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import secrets
import time
from typing import Any, Iterator, Optional

from aiohttp import web

from qim.config.media import MediaConfig
from qim.errors import EngineError
from qim.obs.httpauth import DeviceAuth
from qim.obs.node import ServiceNode
from qim.proto.v1.media_pb2 import MediaRef
from qim.services.media.access import check_download
from qim.services.media.inspect import MediaRefused, check_name, inspect, mib
from qim.services.media.multipart import Multipart
from qim.services.media.sweep import MediaSweeper
from qim.stores.media import open_media_ledger
from qim.stores.open import open_stores
from qim.stores.revocations import open_revocations
from qim.stores.s3 import ObjectMissing, ObjectStore
from qim.wire.media import THUMBNAIL_MAX, sign_ref
from qim.wire.tokens import TokenVerifier

logger = logging.getLogger(__name__)
PROBE_S = 5.0  # how often the object store is probed (readiness)
STREAM_BYTES = 4 * 1024 * 1024  # a download is read from the store and sent in pieces of this


def _hexid(raw: str, what: str) -> bytes:
    try:
        value = bytes.fromhex(raw)
    except ValueError:
        value = b""
    if len(value) != 16 or not any(value):  # an all-zero id is no id (the id codec would raise: a 500)
        raise MediaRefused(400, "bad_request", f"{what} must be 32 hex characters, not all zero")
    return value


class MediaNode(ServiceNode, Multipart):
    """The MediaService's node (module doc)."""

    service = "media"

    def __init__(self, config: MediaConfig, stores: Any = None) -> None:
        super().__init__(config.metrics_listen)
        self.config = config
        verifier = TokenVerifier(
            tuple(config.token_keys),
            config.token_audience,
            config.token_issuer,
            config.token_leeway_s,
            config.token_max_ttl_s,
        )
        layout = config.common.redis_layout
        revocations = open_revocations(layout)
        self.http_auth = DeviceAuth(verifier, config.tenant, revocations.cutoffs)
        self.http_cors = config.cors_origins  # a web page of these origins may upload and download (0146)
        self.objects = ObjectStore(config.s3)
        self.ledger = open_media_ledger(layout)
        self.closing(self.ledger.close, "media ledger")
        self.stores = stores if stores is not None else open_stores(layout, tier=config.common.tier)
        self.closing(self.stores.close, "stores")
        self.store_error = ""  # the last probe's failure ("" when the store answered)
        held = (self.ledger, self.objects, self.stores.messages)  # the sweeper's (decision 0139)
        self.sweeper = MediaSweeper(*held, config.tenant, config.orphan_ms, secrets.token_hex(8), self.registry)

    @property
    def http_port(self) -> int:
        """The port the routes are served on (QIM_MEDIA_METRICS_LISTEN may say 0: any)."""
        assert self._http is not None, "not started"
        return int(self._http.sockets[0].getsockname()[1])

    def not_ready(self) -> Iterator[str]:
        """The object store did not answer the last probe (/healthz 503 until it does)."""
        if self.store_error:
            yield f"object store unreachable: {self.store_error}"

    async def setup(self) -> None:
        """Create the bucket when missing (a development store; production creates it),
        then probe the store every PROBE_S seconds (a supervised task)."""
        await self.objects.ensure_bucket()
        self.spawn(self._probe(), "object store probe")
        self.spawn(self.sweeper.run(self.config.sweep_interval_ms / 1000), "media sweeper")  # decision 0139

    async def _probe(self) -> None:
        # not ready while the store is away, ready again when it answers: the node heals by
        # itself, and a balancer sends uploads and downloads to the nodes that can serve them
        while True:
            await asyncio.sleep(PROBE_S)
            try:
                await self.objects.ping()
                self.store_error = ""
            except (EngineError, ObjectMissing) as exc:
                self.store_error = str(exc)[:200]

    async def upload(self, request: web.Request, device: Any) -> web.Response:
        """POST /v1/media (module doc)."""
        cfg = self.config
        if request.content_length is not None and request.content_length > cfg.max_file_bytes:
            raise MediaRefused(
                413,
                "too_large",
                f"the file is {mib(request.content_length)}; a photo can be at most {mib(cfg.max_file_bytes)} "
                "(other files that large are sent in parts)",
            )
        try:
            size = int(request.headers.get("X-QIM-Size", ""))
            sha256 = request.headers.get("X-QIM-SHA256", "")
            binascii.unhexlify(sha256)
        except (ValueError, binascii.Error):
            raise MediaRefused(
                400, "bad_request", "X-QIM-Size (bytes) and X-QIM-SHA256 (64 hex) are required"
            ) from None
        if size > cfg.max_file_bytes or len(sha256) != 64:
            raise MediaRefused(
                413 if size > cfg.max_file_bytes else 400,
                "bad_request",
                f"the file is {mib(size)}; a photo can be at most {mib(cfg.max_file_bytes)} (other files that "
                "large are sent in parts)"
                if size > cfg.max_file_bytes
                else "SHA-256 not 64 hex characters",
            )
        name = check_name(request.query.get("name", ""))
        strip = request.query.get("keep_metadata", "0") != "1"
        data = await request.read()
        got = await asyncio.to_thread(
            inspect, data, size, sha256, request.content_type, strip=strip, max_pixels=cfg.max_pixels
        )
        day = int(time.time()) // 86_400
        if not await self.ledger.charge(cfg.tenant, device.user_id, day, len(got.data), cfg.quota_bytes_per_day):
            raise MediaRefused(
                429, "quota", f"daily upload quota of {cfg.quota_bytes_per_day} bytes reached; it renews at 00:00 UTC"
            )
        media_id = secrets.token_hex(16)
        try:
            await self.objects.put("o/" + media_id, got.data, got.mime)
        except BaseException:
            await self.ledger.refund(cfg.tenant, device.user_id, day, len(got.data))
            raise
        return await self.finish(
            device,
            media_id,
            got.mime,
            len(got.data),
            got.sha256,
            name,
            got.width,
            got.height,
            got.thumbnail,
            got.stripped,
        )

    async def finish(
        self,
        device: Any,
        media_id: str,
        mime: str,
        size: int,
        sha256: str,
        name: str,
        width: int = 0,
        height: int = 0,
        thumbnail: bytes = b"",
        stripped: bool = False,
    ) -> web.Response:
        """Record a stored object and answer its signed reference (201, module doc)."""
        cfg = self.config
        await self.ledger.record(
            cfg.tenant,
            media_id,
            {
                "owner": str(device.user_id),
                "device": str(device.device_id),
                "key": "o/" + media_id,
                "mime": mime,
                "size": str(size),
                "sha256": sha256,
                "created_ms": str(int(time.time() * 1000)),
            },
        )
        thumb = thumbnail if len(thumbnail) <= THUMBNAIL_MAX else b""
        ref = MediaRef(
            media_id=media_id,
            mime=mime,
            size=size,
            width=width,
            height=height,
            sha256=bytes.fromhex(sha256),
            thumbnail=thumb,
            owner=device.user_id,
            name=name,
        )
        body = sign_ref(cfg.ref_key, cfg.tenant, ref)
        return web.json_response(
            status=201,
            data={
                "media_id": media_id,
                "mime": mime,
                "size": size,
                "width": width,
                "height": height,
                "sha256": sha256,
                "name": name,
                "stripped": stripped,
                "thumbnail": base64.b64encode(thumb).decode(),
                "ref": base64.b64encode(body).decode(),
            },
        )

    async def download(self, request: web.Request, device: Any) -> web.StreamResponse:
        """GET /v1/media/{media_id} (module doc)."""
        media_id = request.match_info["media_id"]
        if len(media_id) != 32 or any(c not in "0123456789abcdef" for c in media_id):
            raise MediaRefused(404, "no_media", "no such media")
        q = request.query
        conversation, message = (
            _hexid(q.get("conversation", ""), "conversation"),
            _hexid(q.get("message", ""), "message"),
        )
        try:
            peer = int(q.get("peer", "0"))
        except ValueError:
            raise MediaRefused(400, "bad_request", "peer must be a user id") from None
        await check_download(
            self.stores.messages,
            self.stores.groups,
            self.config.tenant,
            device.user_id,
            conversation,
            message,
            peer,
            media_id,
        )
        record = await self.ledger.get(self.config.tenant, media_id)
        if record is None:
            raise MediaRefused(404, "no_media", "no such media")
        total = int(record["size"])
        ranged = bool(request.headers.get("Range"))
        first, last = _range(request.headers.get("Range"), total)
        start, end = (first or 0), (last if last is not None else total - 1)
        try:  # the first piece before the status is sent: a missing object is still a 404
            piece = await self.objects.get(record["key"], start, min(end, start + STREAM_BYTES - 1)) if total else b""
        except ObjectMissing:
            raise MediaRefused(404, "no_media", "the media object is gone") from None
        headers = {
            "Content-Type": record["mime"],
            "Content-Length": str(end - start + 1 if total else 0),
            "Accept-Ranges": "bytes",
            "ETag": f'"{record["sha256"]}"',
            "Cache-Control": "private, max-age=300",
            "X-Content-Type-Options": "nosniff",
            "Content-Disposition": "inline" if record["mime"].startswith("image/") else "attachment",
        }
        if ranged:
            headers["Content-Range"] = f"bytes {start}-{end}/{total}"
        # streamed in STREAM_BYTES pieces: a large file never sits whole in the node's memory
        response = web.StreamResponse(status=206 if ranged else 200, headers=headers)
        await response.prepare(request)
        await response.write(piece)
        at = start + len(piece)
        while at <= end and total:
            piece = await self.objects.get(record["key"], at, min(end, at + STREAM_BYTES - 1))
            if not piece:  # shorter than recorded: end the body (its length tells the client)
                break
            await response.write(piece)
            at += len(piece)
        await response.write_eof()
        return response


def _range(header: Optional[str], total: int) -> tuple[Optional[int], Optional[int]]:
    """(first, last) of a single `bytes=a-b`, `a-` or `-n` range; (None, None) without one;
    MediaRefused 416 for one outside the object or several ranges."""
    if not header:
        return None, None
    unit, _, spec = header.partition("=")
    a, sep, b = spec.strip().partition("-")
    try:
        if unit.strip() != "bytes" or not sep or "," in spec:
            raise ValueError
        if a:
            first, last = int(a), min(int(b), total - 1) if b else total - 1
        else:
            first, last = max(total - int(b), 0), total - 1
        if first < 0 or first > last or first >= total:
            raise ValueError
    except ValueError:
        raise MediaRefused(416, "bad_range", f"range not satisfiable; the object has {total} bytes") from None
    return first, last
