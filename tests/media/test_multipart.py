"""Large files in presigned parts on real engines (s3proxy, Redis; issue 40;
qim/services/media/multipart.py): an upload cut twice (after its start, and after one
more part) resumes on another MediaService node with only the missing parts and ends in a
byte-exact object; bad declarations and a hash mismatch at the end are refused with
nothing left in the bucket; another user cannot see or finish someone's upload."""

from __future__ import annotations

import asyncio
import hashlib
import os

import aiohttp
import pytest

from qim.sdk.media import MediaRefused, upload_large
from qim.services.media.multipart import PART_BYTES
from tests.media.helpers import running_media, token


async def _put(url: str, data: bytes) -> None:
    async with aiohttp.ClientSession() as http, http.put(url, data=data) as r:
        assert r.status == 200, await r.text()


def test_cut_twice_resumed_on_another_node(media_env) -> None:
    env, key = media_env
    data = os.urandom(2 * PART_BYTES + 12345)  # three parts, the last short
    bearer = token(key, 7)["Authorization"].split()[1]

    async def run() -> None:
        async with running_media(env) as (one, http, base1), running_media(env) as (two, _, base2):
            spec = {
                "size": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "mime": "application/octet-stream",
                "name": "backup.bin",
            }
            async with http.post(f"{base1}/v1/media/uploads", json=spec, headers=token(key, 7)) as r:
                assert r.status == 201, await r.text()
                plan = await r.json()
            assert plan["parts"] == 3 and sorted(plan["urls"]) == ["1", "2", "3"]
            # cut 1: nothing sent; cut 2: part 1 sent, then the link drops
            await _put(plan["urls"]["1"], data[:PART_BYTES])
            # finishing early is refused and keeps the upload
            async with http.post(f"{base1}/v1/media/uploads/{plan['upload']}/complete", headers=token(key, 7)) as r:
                assert r.status == 400 and "[2, 3]" in await r.text()
            # another user sees no such upload
            async with http.get(f"{base2}/v1/media/uploads/{plan['upload']}", headers=token(key, 8)) as r:
                assert r.status == 404
            told: list[tuple[int, int]] = []
            up = await upload_large(
                base2, bearer, data, resume=plan["upload"], progress=lambda s, t: told.append((s, t))
            )
            assert told == [(PART_BYTES * 2, len(data)), (len(data), len(data))]  # parts 2 and 3 only
            assert up.ref.media_id == plan["media_id"] and up.ref.size == len(data) and up.ref.name == "backup.bin"
            assert up.ref.sha256 == hashlib.sha256(data).digest()
            assert await one.objects.keys() == ["o/" + plan["media_id"]]
            assert await one.objects.get("o/" + plan["media_id"]) == data
            # the finished upload says done, and completing it again (an answer lost to a cut)
            # gives the same reference without storing anything twice (docs/decisions/0147)
            async with http.get(f"{base1}/v1/media/uploads/{plan['upload']}", headers=token(key, 7)) as r:
                assert r.status == 200 and (await r.json())["done"] is True
            again = await upload_large(base1, bearer, data, resume=plan["upload"])
            assert again.body == up.body
            assert await one.objects.keys() == ["o/" + plan["media_id"]]

    asyncio.run(run())


def test_bad_multipart_uploads_are_refused_and_nothing_stored(media_env) -> None:
    env, key = media_env
    env = dict(env, QIM_MEDIA_MAX_UPLOAD_BYTES=str(20 * PART_BYTES))
    data = os.urandom(PART_BYTES + 10)
    bearer = token(key, 7)["Authorization"].split()[1]

    async def run() -> None:
        async with running_media(env) as (node, http, base):
            cases = [
                ({"size": 10**12, "sha256": "0" * 64, "mime": "video/mp4"}, 413, "at most"),
                ({"size": 100, "sha256": "0" * 64, "mime": "image/jpeg"}, 415, "POST /v1/media"),
                ({"size": 100, "sha256": "0" * 64, "mime": "text/html"}, 415, "not allowed"),
                ({"size": 100, "sha256": "0" * 64, "mime": "video/mp4", "name": "../x"}, 400, "plain name"),
                ({"size": 100, "mime": "video/mp4"}, 400, "sha256"),
            ]
            for spec, status, needle in cases:
                async with http.post(f"{base}/v1/media/uploads", json=spec, headers=token(key, 7)) as r:
                    body = await r.text()
                    assert (r.status, needle in body) == (status, True), (spec, r.status, body)
            # declared as a video, the bytes are not: refused after the parts are joined, then deleted
            with pytest.raises(MediaRefused) as wrong_type:
                await upload_large(base, bearer, data, mime="video/mp4")
            assert wrong_type.value.status == 415
            # a hash that is not the bytes': the upload is started for other bytes than sent
            spec = {
                "size": len(data),
                "sha256": hashlib.sha256(b"other").hexdigest(),
                "mime": "application/octet-stream",
            }
            async with http.post(f"{base}/v1/media/uploads", json=spec, headers=token(key, 7)) as r:
                plan = await r.json()
            await _put(plan["urls"]["1"], data[:PART_BYTES])
            await _put(plan["urls"]["2"], data[PART_BYTES:])
            async with http.post(f"{base}/v1/media/uploads/{plan['upload']}/complete", headers=token(key, 7)) as r:
                assert r.status == 400 and "SHA-256" in await r.text()
            assert await node.objects.keys() == []

    asyncio.run(run())
