"""qim-js media (web/src/sdk/media.ts, the SDK the web page uses; issue 40; decision 0138)
against a real MediaService (s3proxy, the session stack's Redis and token key), run in
Node by vite-node through web/test/medialive.ts: a photo uploaded by qim-js with the
device's bearer token is accepted (its declared size, SHA-256 hex and sniffed type are
what the service checks), its reference sent as MEDIA by the same user reaches the peer,
and qim-js downloads it through the message byte-exact to the stored object (the EXIF-
stripped bytes whose SHA-256 the reference carries); a stranger's download is
MediaRefused 403 with the service's reason, a decompression bomb 422.

The page's attach button, progress bars, thumbnails and click-to-open in Chromium:
tests/web/test_web_media_page.py (docs/sdk.md "The web page's media")."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from pathlib import Path

from qim.consts import MESSAGE_TYPE_MEDIA
from qim.wire.devtoken import issue_dev_token
from qim.wire.media import decode_ref
from tests.e2e.sdkclient import client, close_all
from tests.media.conftest import s3_engine  # noqa: F401  # the module's private s3proxy (a fixture)
from tests.media.helpers import bomb_png, photo_with_gps, running_media
from tests.sdk.realstack import eventually, users

WEB = Path(__file__).resolve().parents[2] / "web"


async def qimjs(**request) -> dict:
    """One call of web/test/medialive.ts in Node; its JSON answer."""
    proc = await asyncio.create_subprocess_exec(
        str(WEB / "node_modules" / ".bin" / "vite-node"),
        "test/medialive.ts",
        json.dumps(request),
        cwd=WEB,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode == 0, err.decode()[-2000:]
    return json.loads(out.decode().strip().splitlines()[-1])


async def test_qimjs_uploads_and_downloads_through_a_real_media_service(stack, s3_engine, tmp_path) -> None:  # noqa: F811
    env = {**stack.env, **s3_engine.env(bucket="t-qimjs-media"), "QIM_MEDIA_METRICS_LISTEN": "127.0.0.1:0"}
    a, b, c = users(3)
    tok = {u: issue_dev_token(stack.token_key, 0, u, 1) for u in (a, b, c)}
    photo = tmp_path / "beach.jpg"
    photo.write_bytes(photo_with_gps())
    async with running_media(env) as (node, _, base):
        up = await qimjs(op="upload", base=base, token=tok[a], file=str(photo), name="beach.jpg")
        assert "ref" in up, up
        body = base64.b64decode(up["ref"])
        ref = decode_ref(body)
        assert (ref.owner, ref.name, ref.mime, ref.width, ref.height) == (a, "beach.jpg", "image/jpeg", 800, 600)
        stored = await node.objects.get("o/" + ref.media_id)
        assert hashlib.sha256(stored).digest() == ref.sha256 and b"QIMCam" not in stored  # EXIF stripped

        ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
        await ca.connect()
        await cb.connect()
        conv = (await ca.open_direct(b)).conversation_id
        ack = await ca.send(conv, body, MESSAGE_TYPE_MEDIA)

        async def received():
            if await cb.conversation(conv) is None:
                return []
            return [m for m in await cb.messages(conv) if m.message_type == MESSAGE_TYPE_MEDIA]

        await eventually(received, timeout=60, what="the MEDIA message reaches b")
        where = dict(ref=up["ref"], conv=conv.hex(), message=ack.message_id.hex())
        got = await qimjs(op="download", base=base, token=tok[b], peer=str(a), **where)
        assert got == {"sha256": hashlib.sha256(stored).hexdigest(), "size": len(stored), "type": "image/jpeg"}
        stranger = await qimjs(op="download", base=base, token=tok[c], peer=str(a), **where)
        assert stranger["status"] == 403 and "not a participant" in stranger["reason"], stranger

        bomb = tmp_path / "bomb.png"
        bomb.write_bytes(bomb_png())
        refused = await qimjs(op="upload", base=base, token=tok[a], file=str(bomb), name="bomb.png")
        assert refused["status"] == 422 and refused["reason"], refused
        await close_all(ca, cb)
