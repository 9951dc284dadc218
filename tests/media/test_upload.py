"""Uploads through the MediaService on real engines (s3proxy, Redis; issue 40;
docs/decisions/0138): a photo's EXIF GPS is stripped and a thumbnail made, and every bad
upload (wrong size, hash mismatch, bytes not of the declared type, a decompression bomb,
a path in the name, over the quota, no token) is a clear HTTP error with nothing stored
(the bucket listed)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io

from PIL import Image

from qim.config.env import Env
from qim.stores.s3 import ObjectStore, S3Config
from qim.wire.media import check_media_body
from tests.media.helpers import GPS_IFD, bomb_png, declared, photo_with_gps, running_media, token


def test_photo_is_stripped_stored_and_referenced(media_env) -> None:
    env, key = media_env
    photo = photo_with_gps()
    assert Image.open(io.BytesIO(photo)).getexif().get_ifd(GPS_IFD)  # the fixture has GPS

    async def run() -> None:
        async with running_media(env) as (node, http, base):
            async with http.post(
                f"{base}/v1/media?name=beach.jpg",
                data=photo,
                headers={**token(key, 1001), **declared(photo, "image/jpeg")},
            ) as r:
                assert r.status == 201, await r.text()
                ref = await r.json()
            keys = await node.objects.keys()
            assert keys == ["o/" + ref["media_id"]]
            stored = await node.objects.get(keys[0])
        assert (ref["mime"], ref["width"], ref["height"], ref["name"]) == ("image/jpeg", 800, 600, "beach.jpg")
        assert ref["sha256"] == hashlib.sha256(stored).hexdigest() and ref["size"] == len(stored)
        img = Image.open(io.BytesIO(stored))
        assert img.size == (800, 600) and not img.getexif() and b"QIMCam" not in stored
        thumb = Image.open(io.BytesIO(base64.b64decode(ref["thumbnail"])))
        assert thumb.format == "WEBP" and max(thumb.size) == 320 and len(base64.b64decode(ref["thumbnail"])) < 8192
        media = check_media_body(b"k" * 40, 0, 1001, base64.b64decode(ref["ref"]))
        assert media.media_id == ref["media_id"] and media.sha256.hex() == ref["sha256"]

    asyncio.run(run())


def test_keep_metadata_on_request(media_env) -> None:
    env, key = media_env
    photo = photo_with_gps()

    async def run() -> None:
        async with running_media(env) as (node, http, base):
            async with http.post(
                f"{base}/v1/media?keep_metadata=1",
                data=photo,
                headers={**token(key, 1001), **declared(photo, "image/jpeg")},
            ) as r:
                assert r.status == 201, await r.text()
                ref = await r.json()
            assert await node.objects.get("o/" + ref["media_id"]) == photo

    asyncio.run(run())


def test_bad_uploads_are_refused_and_nothing_is_stored(media_env) -> None:
    env, key = media_env
    photo, pdf = photo_with_gps(), b"%PDF-1.7\n" + b"x" * 5000
    env = dict(env, QIM_MEDIA_QUOTA_BYTES_PER_DAY=str(len(photo) * 7 // 2))  # three stripped photos fit
    cases = [
        ("wrong size", photo, declared(photo, "image/jpeg", size=len(photo) + 1), "", 400, "declared size"),
        ("hash mismatch", photo, declared(photo, "image/jpeg", sha="0" * 64), "", 400, "SHA-256"),
        ("not the declared type", pdf, declared(pdf, "image/png"), "", 415, "not the declared image/png"),
        ("a type not allowed", pdf, declared(pdf, "text/html"), "", 415, "not allowed"),
        ("a decompression bomb", bomb_png(), declared(bomb_png(), "image/png"), "", 422, "megapixels"),
        ("an empty file", b"", declared(b"", "application/octet-stream"), "", 400, "the file is empty"),
        ("a name too long", photo, declared(photo, "image/jpeg"), "?name=" + "照" * 86 + ".jpg", 400,
         "bytes of UTF-8; at most 255 (shorten it)"),
        ("above one upload", pdf, declared(pdf, "application/pdf", size=17 << 20), "", 413,
         "the file is 17 MiB; a photo can be at most 16 MiB"),
        ("a path in the name", photo, declared(photo, "image/jpeg"), "?name=../../etc/passwd", 400, "plain name"),
        ("a backslash path", photo, declared(photo, "image/jpeg"), "?name=..%5Cx.jpg", 400, "plain name"),
        ("no declaration", photo, {"Content-Type": "image/jpeg"}, "", 400, "X-QIM-Size"),
    ]

    async def run() -> None:
        async with running_media(env) as (node, http, base):
            for what, data, headers, query, status, needle in cases:
                async with http.post(f"{base}/v1/media{query}", data=data, headers={**token(key, 7), **headers}) as r:
                    body = await r.text()
                    assert (r.status, needle in body) == (status, True), (what, r.status, body)
            assert await node.objects.keys() == [], "a refused upload left an object"
            async with http.post(f"{base}/v1/media", data=photo, headers=declared(photo, "image/jpeg")) as r:
                assert r.status == 401 and "Bearer" in await r.text()
            # the quota: three and a half photos a day (stripped, each a little smaller): the fourth is refused
            accepted = 0
            for _ in range(10):
                async with http.post(
                    f"{base}/v1/media", data=photo, headers={**token(key, 7), **declared(photo, "image/jpeg")}
                ) as r:
                    if r.status == 429:
                        assert "quota" in await r.text()
                        break
                    assert r.status == 201, await r.text()
                    accepted += 1
            assert len(await node.objects.keys()) == accepted == 3
            # another user's quota is their own
            async with http.post(
                f"{base}/v1/media", data=photo, headers={**token(key, 8), **declared(photo, "image/jpeg")}
            ) as r:
                assert r.status == 201

    asyncio.run(run())


def test_file_above_the_limit_is_413(media_env) -> None:
    env, key = media_env
    env = dict(env, QIM_MEDIA_MAX_FILE_BYTES="4096")
    blob = b"\x00" * 5000

    async def run() -> None:
        async with running_media(env) as (node, http, base):
            async with http.post(
                f"{base}/v1/media", data=blob, headers={**token(key, 7), **declared(blob, "application/octet-stream")}
            ) as r:
                assert r.status == 413 and "the file is 5 KiB; a photo can be at most 4 KiB" in await r.text()
            assert await node.objects.keys() == []
        assert await ObjectStore(S3Config.from_env(Env(env))).keys() == []

    asyncio.run(run())
