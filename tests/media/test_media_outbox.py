"""The steps of a pending media send a crash can cut (qim/sdk/media_outbox.py; decision
0147), on the session stack and a MediaService node: a row whose upload completed (its
reference recorded) is only sent by `resume_media`, nothing uploaded again; the same row
found again after its send was handed to the sender (a crash before the row was
dropped) is dropped, not sent again: the other member has the message once. A row whose
file is gone is dropped and told."""

from __future__ import annotations

import asyncio
import os

from qim.consts import MESSAGE_TYPE_MEDIA
from qim.sdk.events import SendAck
from qim.sdk.media import upload
from qim.sdk.media_outbox import PendingMedia
from qim.wire.devtoken import issue_dev_token
from tests.e2e.sdkclient import client, close_all
from tests.media.helpers import running_media
from tests.sdk.realstack import eventually, users


async def test_a_recorded_reference_is_sent_once_whatever_step_was_cut(stack, s3_engine, tmp_path) -> None:
    env = {**stack.env, **s3_engine.env(bucket="t-media-outbox"), "QIM_MEDIA_METRICS_LISTEN": "127.0.0.1:0"}
    a, b = users(2)
    data = b"%PDF-1.7\n" + os.urandom(3000)
    async with running_media(env) as (node, _, base):
        ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
        await ca.connect()
        await cb.connect()
        ca.media_urls = cb.media_urls = [base]
        conv = (await ca.open_direct(b)).conversation_id
        await cb.open_direct(a)
        up = await upload(base, issue_dev_token(stack.token_key, 0, a, 1), data, name="r.pdf")
        outbox = ca._outbox()
        cmid = await outbox.run(outbox.reserve)
        path = tmp_path / "r.pdf"
        await asyncio.to_thread(path.write_bytes, data)
        row = PendingMedia(cmid, conv, b, str(path), False, len(data), "", "", "r.pdf", False, ref=up.body)
        await outbox.run(outbox.add, row)
        keys = await node.objects.keys()

        ((done, ack),) = await ca.resume_media()
        assert done.client_message_id == cmid and isinstance(ack, SendAck), ack
        assert await node.objects.keys() == keys  # only sent: nothing uploaded again

        # found again after the send was handed to the sender (a crash before the media row
        # went): not sent again, the row dropped, the send's own outcome is the sender's
        await outbox.run(outbox.add, row)
        ((_, again),) = await ca.resume_media()
        assert again == cmid and await ca.pending_media() == []

        gone = PendingMedia(
            await outbox.run(outbox.reserve), conv, b, str(tmp_path / "nope.bin"), False, 10, "", "", "nope.bin", False
        )
        await outbox.run(outbox.add, gone)
        ((_, told),) = await ca.resume_media()
        assert isinstance(told, FileNotFoundError) and await ca.pending_media() == []

        async def media() -> list:
            return [m for m in await cb.messages(conv) if m.message_type == MESSAGE_TYPE_MEDIA]

        await eventually(media, timeout=60, what="the MEDIA message reaches b")
        await asyncio.sleep(1.0)  # a second copy would come right behind the first
        (got,) = await media()
        assert got.message_id == ack.message_id and await cb.download(got) == data
        await close_all(ca, cb)
