"""Large files: presigned multipart uploads to the object store, resumable after a cut
(issue 40; docs/decisions/0138 amendment). The MediaNode's routes:

- `POST /v1/media/uploads` (JSON {size, sha256, mime, name}): checks the declaration
  (size up to QIM_MEDIA_MAX_UPLOAD_BYTES, so at most MAX_PARTS parts of PART_BYTES; an
  allowed type but not an image: images go through `POST /v1/media`, where their
  metadata is stripped), charges the whole size to the day's quota, starts an S3
  multipart upload under the object's final key and answers 201 {upload, media_id,
  part_bytes, parts, urls: {part number: presigned PUT URL}}. The device PUTs each part
  straight to the store.
- `GET /v1/media/uploads/{upload}`: after a cut, the parts the store holds and fresh
  URLs for the others (any MediaService node answers: the upload is recorded in Redis).
- `POST /v1/media/uploads/{upload}/complete`: every part present with its size (400
  naming the missing ones otherwise, the upload kept), the parts joined, then the whole
  object read back: its SHA-256 and sniffed type must be the declared ones, else the
  object is deleted, the quota refunded and 400/415 answered. Then the reference, as
  `POST /v1/media` answers it. The upload stays recorded as done: completing it again
  (a client whose answer was lost) answers the same reference while its file exists
  (docs/decisions/0147); its status then says `done`.

An upload belongs to the user who started it (another user's id is 404) and is
recorded for UPLOAD_TTL_S.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import Any

from aiohttp import web

from qim.services.media.inspect import ALLOWED, IMAGES, MediaRefused, check_name, mib
from qim.wire.media import sniff

PART_BYTES = 8 * 1024 * 1024  # S3's smallest part is 5 MiB (all but the last)
MAX_PARTS = 1000  # with PART_BYTES: 8 GB at most, and a bounded part listing
UPLOAD_TTL_S = 86_400
URL_TTL_S = 3600
READ_BYTES = 8 * 1024 * 1024


class Multipart:
    """The multipart routes of the MediaNode (module doc); needs the node's `config`,
    `objects`, `ledger` and `finish`."""

    config: Any
    objects: Any
    ledger: Any

    async def finish(self, *args: Any, **kw: Any) -> web.Response:
        """Record the object and answer its reference: the MediaNode's (node.py)."""
        raise NotImplementedError

    async def start_upload(self, request: web.Request, device: Any) -> web.Response:
        """POST /v1/media/uploads (module doc)."""
        cfg = self.config
        try:
            spec = await request.json()
            size, sha256, mime = int(spec["size"]), str(spec["sha256"]).lower(), str(spec["mime"])
            bytes.fromhex(sha256)
            name = check_name(str(spec.get("name", "")))
        except (ValueError, KeyError, TypeError):
            raise MediaRefused(400, "bad_request", "JSON {size, sha256 (64 hex), mime, name} is required") from None
        if len(sha256) != 64 or size <= 0:
            raise MediaRefused(400, "bad_request", "size must be positive and sha256 64 hex characters")
        parts = -(-size // PART_BYTES)
        if size > cfg.max_upload_bytes or parts > MAX_PARTS:
            raise MediaRefused(
                413,
                "too_large",
                f"the file is {mib(size)}; at most {mib(min(cfg.max_upload_bytes, MAX_PARTS * PART_BYTES))}",
            )
        if mime not in ALLOWED:
            raise MediaRefused(415, "type_not_allowed", f"type {mime[:64]!r} is not allowed")
        if mime in IMAGES:
            raise MediaRefused(415, "image_multipart", "images go through POST /v1/media (their metadata is stripped)")
        day = int(time.time()) // 86_400
        if not await self.ledger.charge(cfg.tenant, device.user_id, day, size, cfg.quota_bytes_per_day):
            raise MediaRefused(
                429, "quota", f"daily upload quota of {cfg.quota_bytes_per_day} bytes reached; it renews at 00:00 UTC"
            )
        media_id, upload = secrets.token_hex(16), secrets.token_hex(16)
        try:
            s3_upload = await self.objects.create_multipart("o/" + media_id, mime)
        except BaseException:
            await self.ledger.refund(cfg.tenant, device.user_id, day, size)
            raise
        await self.ledger.record(
            cfg.tenant,
            "u" + upload,
            {
                "owner": str(device.user_id),
                "media_id": media_id,
                "s3": s3_upload,
                "size": str(size),
                "sha256": sha256,
                "mime": mime,
                "name": name,
                "parts": str(parts),
                "day": str(day),
            },
            UPLOAD_TTL_S,
        )
        return web.json_response(
            status=201,
            data={
                "upload": upload,
                "media_id": media_id,
                "part_bytes": PART_BYTES,
                "parts": parts,
                "urls": self._urls(media_id, s3_upload, range(1, parts + 1)),
            },
        )

    def _urls(self, media_id: str, s3_upload: str, numbers: Any) -> dict[str, str]:
        return {str(n): self.objects.presign_part("o/" + media_id, s3_upload, n, URL_TTL_S) for n in numbers}

    async def _mine(self, request: web.Request, device: Any) -> tuple[str, dict[str, str]]:
        upload = request.match_info["upload"]
        rec = await self.ledger.get(self.config.tenant, "u" + upload) if len(upload) == 32 else None
        if rec is None or rec["owner"] != str(device.user_id):
            raise MediaRefused(404, "no_upload", "no such upload")
        return upload, rec

    async def upload_status(self, request: web.Request, device: Any) -> web.Response:
        """GET /v1/media/uploads/{upload}: the parts received and URLs for the others;
        `done: true` (no URLs) once completed: completing again answers the reference."""
        upload, rec = await self._mine(request, device)
        if rec.get("done"):
            parts = int(rec["parts"])
            return web.json_response(
                {
                    "upload": upload,
                    "media_id": rec["media_id"],
                    "part_bytes": PART_BYTES,
                    "parts": parts,
                    "received": list(range(1, parts + 1)),
                    "urls": {},
                    "done": True,
                }
            )
        done = {p["PartNumber"]: p["Size"] for p in await self.objects.parts("o/" + rec["media_id"], rec["s3"])}
        missing = [n for n in range(1, int(rec["parts"]) + 1) if n not in done]
        return web.json_response(
            {
                "upload": upload,
                "media_id": rec["media_id"],
                "part_bytes": PART_BYTES,
                "parts": int(rec["parts"]),
                "received": sorted(done),
                "urls": self._urls(rec["media_id"], rec["s3"], missing),
            }
        )

    async def complete_upload(self, request: web.Request, device: Any) -> web.Response:
        """POST /v1/media/uploads/{upload}/complete (module doc)."""
        cfg = self.config
        upload, rec = await self._mine(request, device)
        key, size, count = "o/" + rec["media_id"], int(rec["size"]), int(rec["parts"])
        if rec.get("done"):  # completed, its answer lost to a cut or a killed node: the same reference (0147)
            if await self.ledger.get(cfg.tenant, rec["media_id"]) is None:
                raise MediaRefused(404, "no_upload", "the upload was completed and its file is gone; upload it again")
            return await self.finish(device, rec["media_id"], rec["done"], size, rec["sha256"], rec["name"])
        parts = await self.objects.parts(key, rec["s3"])
        want = {n: PART_BYTES if n < count else size - PART_BYTES * (count - 1) for n in range(1, count + 1)}
        got = {p["PartNumber"]: p["Size"] for p in parts}
        wrong = sorted(n for n in want if got.get(n) != want[n]) + sorted(n for n in got if n not in want)
        if wrong:
            raise MediaRefused(400, "parts_missing", f"parts missing or of the wrong size: {wrong[:20]}")
        await self.objects.complete_multipart(key, rec["s3"], sorted(parts, key=lambda p: p["PartNumber"]))
        digest, head = hashlib.sha256(), b""
        for first in range(0, size, READ_BYTES):
            chunk = await self.objects.get(key, first, min(first + READ_BYTES, size) - 1)
            digest.update(chunk)
            head = head or chunk[:16]
        sniffed = sniff(head)
        refusal = None
        if digest.hexdigest() != rec["sha256"]:
            refusal = MediaRefused(400, "hash_mismatch", "the SHA-256 of the parts is not the declared one")
        elif rec["mime"] != "application/octet-stream" and sniffed != rec["mime"]:
            refusal = MediaRefused(415, "type_mismatch", f"the bytes are {sniffed}, not the declared {rec['mime']}")
        elif sniffed in IMAGES:
            refusal = MediaRefused(415, "image_multipart", "images go through POST /v1/media")
        if refusal is not None:
            await self.ledger.forget(cfg.tenant, "u" + upload)
            await self.objects.delete(key)
            await self.ledger.refund(cfg.tenant, device.user_id, int(rec["day"]), size)
            raise refusal
        answer = await self.finish(device, rec["media_id"], sniffed, size, rec["sha256"], rec["name"])
        # kept as done, not forgotten: a client whose answer was cut completes again on any node (0147)
        await self.ledger.record(cfg.tenant, "u" + upload, {"done": sniffed}, UPLOAD_TTL_S)
        return answer
