"""qim-js uploads a large file in presigned parts (web/src/sdk/mediaparts.ts; issue 40;
docs/decisions/0138 amendment) against a real MediaService and s3proxy, run in Node by
vite-node through web/test/medialive_parts.ts: a 17 MiB PDF (above LARGE_BYTES, which
client.sendMedia sends in parts) goes in three 8 MiB parts straight to the store, the
service joins and checks them and answers a signed reference whose SHA-256 and size are
the file's; sent as MEDIA, the peer's SDK downloads it byte-exact. An upload over the
day's quota is refused at its declaration with the service's reason, nothing sent.
(The retry of a cut part is web/test/mediaparts.test.ts.)"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os

from qim.consts import MESSAGE_TYPE_MEDIA
from qim.wire.devtoken import issue_dev_token
from qim.wire.media import decode_ref
from tests.e2e.sdkclient import client, close_all
from tests.media.conftest import s3_engine  # noqa: F401  # the module's private s3proxy (a fixture)
from tests.media.helpers import running_media
from tests.sdk.realstack import eventually, users
from tests.web.test_web_media import WEB

SIZE = 17 * 1024 * 1024 + 12_345  # three parts of 8 MiB (the last short)


async def parts(**request) -> dict:
    """One upload by web/test/medialive_parts.ts in Node; its JSON answer."""
    proc = await asyncio.create_subprocess_exec(
        str(WEB / "node_modules" / ".bin" / "vite-node"),
        "test/medialive_parts.ts",
        json.dumps(request),
        cwd=WEB,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 300)
    assert proc.returncode == 0, err.decode()[-2000:]
    return json.loads(out.decode().strip().splitlines()[-1])


async def test_qimjs_sends_a_large_file_in_parts(stack, s3_engine, tmp_path) -> None:  # noqa: F811
    env = {
        **stack.env,
        **s3_engine.env(bucket="t-qimjs-parts"),
        "QIM_MEDIA_METRICS_LISTEN": "127.0.0.1:0",
        "QIM_MEDIA_QUOTA_BYTES_PER_DAY": str(SIZE + 1000),
    }
    a, b = users(2)
    data = b"%PDF-1.7\n" + os.urandom(SIZE - 9)
    doc = tmp_path / "report.pdf"
    doc.write_bytes(data)
    async with running_media(env) as (node, _, base):
        tok = issue_dev_token(stack.token_key, 0, a, 1)
        up = await parts(base=base, token=tok, file=str(doc), name="report.pdf")
        assert "ref" in up, up
        assert (up["puts"], up["progress"]) == (3, SIZE)
        body = base64.b64decode(up["ref"])
        ref = decode_ref(body)
        assert (ref.owner, ref.name, ref.mime, ref.size) == (a, "report.pdf", "application/pdf", SIZE)
        assert ref.sha256 == hashlib.sha256(data).digest()
        assert await node.objects.get("o/" + ref.media_id) == data

        ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
        cb.media_url = base
        await ca.connect()
        await cb.connect()
        conv = (await ca.open_direct(b)).conversation_id
        await ca.send(conv, body, MESSAGE_TYPE_MEDIA)

        async def received():
            if await cb.conversation(conv) is None:
                return []
            return [m for m in await cb.messages(conv) if m.message_type == MESSAGE_TYPE_MEDIA]

        await eventually(received, timeout=60, what="the MEDIA message reaches b")
        (got,) = await received()
        assert await cb.download(got) == data

        refused = await parts(base=base, token=tok, file=str(doc), name="again.pdf")
        assert refused["status"] == 429 and "quota" in refused["reason"], refused
        await close_all(ca, cb)
