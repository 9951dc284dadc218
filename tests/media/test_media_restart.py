"""A media send survives an app restart like a pending text (issue 40; docs/decisions/0147;
qim/sdk/media_outbox.py): a 20 MiB file given as bytes is being uploaded in parts when
the app stops (its send task cancelled in the middle of part two, the client closed); a
new Client on the same store lists the pending media send (its upload id, one part
done), `resume_media()` sends only the parts the store lacks and the MEDIA message with
the client_message_id reserved at the first try; the other member gets it once,
byte-exact, and the store keeps neither the row nor its spool copy."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os

import aiohttp

from qim.consts import MESSAGE_TYPE_MEDIA
from qim.sdk.events import SendAck
from qim.services.media.multipart import PART_BYTES
from qim.wire.devtoken import issue_dev_token
from qim.wire.media import decode_ref
from tests.e2e.sdkclient import client, close_all
from tests.media.cutproxy import CutProxy
from tests.media.helpers import running_media
from tests.sdk.realstack import eventually, users

SIZE = 20 * 1024 * 1024  # parts of 8, 8 and 4 MiB
SLACK = 256 * 1024


async def _received(base: str, token: str, upload: str) -> list[int]:
    """The part numbers the store holds for `upload` (the service's status of it)."""
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base}/v1/media/uploads/{upload}", headers={"Authorization": f"Bearer {token}"}) as r:
            assert r.status == 200, await r.text()
            return list((await r.json())["received"])


async def test_pending_media_send_resumes_after_a_restart(stack, s3_engine, tmp_path) -> None:
    data = os.urandom(SIZE)
    stop = asyncio.Event()
    proxy = await CutProxy(s3_engine.endpoint.split("//", 1)[1], [(PART_BYTES + PART_BYTES // 2, stop.set)]).start()
    env = {
        **stack.env,
        **s3_engine.env(bucket="t-media-restart"),
        "QIM_S3_ENDPOINT": proxy.endpoint,
        "QIM_MEDIA_METRICS_LISTEN": "127.0.0.1:0",
    }
    a, b = users(2)
    try:
        async with running_media(env) as (_, _, base):
            ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
            await ca.connect()
            await cb.connect()
            ca.media_urls = cb.media_urls = [base]
            conv = (await ca.open_direct(b)).conversation_id
            await cb.open_direct(a)
            sending = asyncio.create_task(ca.send_media(conv, data, name="clip.bin"))
            await asyncio.wait_for(stop.wait(), 120)  # half of part two is on its way: the app stops
            sending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sending
            await ca.close()
            # the part on its way may still be written by the store: wait until it answered
            await eventually(lambda: proxy.open_parts == 0, timeout=60, what="the part connections end")
            before = proxy.sent

            again = await client(stack, tmp_path, a)  # the same data directory: the same store
            again.media_urls = [base]
            (row,) = await again.pending_media()
            assert (row.size, row.name, row.spooled) == (SIZE, "clip.bin", True) and row.parts_done >= 1
            assert row.upload and not row.ref and await asyncio.to_thread(os.path.exists, row.path)
            held = await _received(base, issue_dev_token(stack.token_key, 0, a, 1), row.upload)
            assert 1 in held and 3 not in held, held  # part two may have reached the store whole before the stop
            await again.connect()
            ((done, ack),) = await again.resume_media()
            assert done.client_message_id == row.client_message_id and isinstance(ack, SendAck), ack
            # after the restart only the parts the store lacked went (plus request headers)
            lacked = SIZE - PART_BYTES * len(held)
            assert lacked <= proxy.sent - before <= lacked + SLACK, (proxy.sent - before, held)
            assert await again.pending_media() == [] and not await asyncio.to_thread(os.path.exists, row.path)
            assert await again.resume_media() == []

            async def media() -> list:
                return [m for m in await cb.messages(conv) if m.message_type == MESSAGE_TYPE_MEDIA]

            await eventually(media, timeout=120, what="the MEDIA message reaches b")
            await asyncio.sleep(1.0)  # a second copy would come right behind the first
            (got,) = await media()
            assert got.message_id == ack.message_id
            assert decode_ref(got.body).sha256 == hashlib.sha256(data).digest()
            assert await cb.download(got) == data
            mine = [m for m in await again.messages(conv) if m.message_type == MESSAGE_TYPE_MEDIA]
            assert [bytes(m.message_id) for m in mine] == [bytes(ack.message_id)]
            await close_all(again, cb)
    finally:
        await proxy.stop()
