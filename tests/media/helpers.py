"""Helpers of the media tests: a MediaNode started on a test's engines, uploads with
their declarations, and test images (a JPEG with EXIF GPS, a decompression bomb)."""

from __future__ import annotations

import contextlib
import hashlib
import io
from typing import AsyncIterator, Optional

import aiohttp
from PIL import Image

from qim.config.env import Env
from qim.config.media import MediaConfig
from qim.services.media.node import MediaNode
from qim.wire.tokens import SigningKey, issue_token

GPS_IFD = 0x8825


def token(key: SigningKey, user: int, device: int = 1) -> dict[str, str]:
    """The Authorization header of a device token of `user` (tenant 0, the dev audience)."""
    return {"Authorization": "Bearer " + issue_token(key, 0, user, device, audience="qim", issuer="qim-dev", ttl_s=600)}


def photo_with_gps(w: int = 800, h: int = 600) -> bytes:
    """A JPEG whose EXIF names a camera and a GPS position."""
    im = Image.new("RGB", (w, h), (200, 30, 30))
    for x in range(0, w, 40):
        im.paste((20, 120, 220), (x, 0, x + 20, h))
    exif = Image.Exif()
    exif[0x010F] = "QIMCam"
    gps = exif.get_ifd(GPS_IFD)
    gps[1], gps[2] = "N", (52.0, 31.0, 12.5)
    out = io.BytesIO()
    im.save(out, "JPEG", exif=exif, quality=90)
    return out.getvalue()


def bomb_png(side: int = 20_000) -> bytes:
    """A small PNG that decodes to `side`² pixels (a 1-bit image: a few hundred KB)."""
    out = io.BytesIO()
    Image.new("1", (side, side)).save(out, "PNG", optimize=True)
    return out.getvalue()


def declared(data: bytes, mime: str, size: Optional[int] = None, sha: Optional[str] = None) -> dict[str, str]:
    """The upload headers declaring `data` (or the given wrong size/hash)."""
    return {
        "Content-Type": mime,
        "X-QIM-Size": str(len(data) if size is None else size),
        "X-QIM-SHA256": sha or hashlib.sha256(data).hexdigest(),
    }


@contextlib.asynccontextmanager
async def running_media(env: dict[str, str]) -> AsyncIterator[tuple[MediaNode, aiohttp.ClientSession, str]]:
    """A started MediaNode of `env`, an HTTP session and its base URL; stopped after."""
    node = MediaNode(MediaConfig.from_env(Env(env)))
    await node.start()
    session = aiohttp.ClientSession()
    try:
        yield node, session, f"http://127.0.0.1:{node.http_port}"
    finally:
        await session.close()
        await node.stop()
