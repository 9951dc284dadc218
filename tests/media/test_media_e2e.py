"""A photo end to end on real engines (issue 40; docs/decisions/0138): uploaded through the
MediaService (s3proxy, the session stack's Redis and token key) with qim.sdk's
send_media, sent as a MEDIA message in a group, downloaded by another member
byte-exact to what is stored (its SHA-256 in the reference) with no EXIF left, by HTTP
range too; a stranger, a member added after the message, a forged or another user's
reference are refused; after a recall the media is refused at once."""

from __future__ import annotations

import hashlib
import io
import os

import pytest
from PIL import Image

from qim.consts import MESSAGE_TYPE_MEDIA
from qim.sdk.events import ServerError
from qim.sdk.media import MediaRefused, fetch, upload
from qim.wire.devtoken import issue_dev_token
from qim.wire.media import decode_ref
from tests.e2e.sdkclient import client, close_all
from tests.e2e.test_groups import qimctl
from tests.media.helpers import GPS_IFD, photo_with_gps, running_media
from tests.sdk.realstack import eventually, users


def _media(cl, conv: bytes):
    async def find():
        return [m for m in await cl.messages(conv) if m.message_type == MESSAGE_TYPE_MEDIA]

    return find


async def test_photo_sent_downloaded_refused_and_recalled(stack, s3_engine, tmp_path) -> None:
    env = {**stack.env, **s3_engine.env(bucket="t-media-e2e"), "QIM_MEDIA_METRICS_LISTEN": "127.0.0.1:0"}
    a, b, c, d = users(4)
    photo = photo_with_gps()
    async with running_media(env) as (node, _, base):
        ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
        await ca.connect()
        await cb.connect()
        for cl in (ca, cb):
            cl.media_url = base
        group = await ca.create_group([b])
        conv, gid = group.conversation_id, group.group_id
        told: list[tuple[int, int]] = []
        ack = await ca.send_media(conv, photo, name="beach.jpg", progress=lambda s, t: told.append((s, t)))
        assert told and told[-1] == (len(photo), len(photo))
        find = _media(cb, conv)
        await eventually(find, timeout=60, what="the MEDIA message reaches b")
        (got,) = await find()
        ref = decode_ref(got.body)
        assert got.message_id == ack.message_id and ref.owner == a and ref.name == "beach.jpg"
        assert (ref.width, ref.height, ref.mime) == (800, 600, "image/jpeg") and ref.thumbnail
        data = await cb.download(got, tmp_path / "beach.jpg")
        stored = await node.objects.get("o/" + ref.media_id)
        assert data == stored and hashlib.sha256(data).digest() == ref.sha256
        assert (tmp_path / "beach.jpg").read_bytes() == data
        assert not Image.open(io.BytesIO(data)).getexif().get_ifd(GPS_IFD) and b"QIMCam" not in data
        tok = {u: issue_dev_token(stack.token_key, 0, u, 1) for u in (b, c, d)}
        part = await fetch(base, tok[b], ref, conv, got.message_id, byte_range=(100, 199))
        assert part == stored[100:200]

        with pytest.raises(MediaRefused) as stranger:
            await fetch(base, tok[c], ref, conv, got.message_id)
        assert stranger.value.status == 403 and "not a member" in stranger.value.reason
        added = qimctl(stack, "membership", "add", "--group", str(gid), "--user", str(d))
        assert added.returncode == 0, added.stdout + added.stderr
        with pytest.raises(MediaRefused) as late:
            await fetch(base, tok[d], ref, conv, got.message_id)
        assert late.value.status == 404, late.value

        # a reference must be the service's and the sender's own
        forged = decode_ref(got.body)
        forged.size += 1
        with pytest.raises(ServerError) as bad:
            await ca.send(conv, forged.SerializeToString(), MESSAGE_TYPE_MEDIA)
        assert "not a reference the MediaService issued" in str(bad.value)
        with pytest.raises(ServerError) as theirs:
            await cb.send(conv, got.body, MESSAGE_TYPE_MEDIA)
        assert "another user" in str(theirs.value)
        with pytest.raises(ServerError):
            await ca.send(conv, b"not a reference", MESSAGE_TYPE_MEDIA)

        # nor can an edit swap the reference of a sent one
        with pytest.raises(ServerError) as edited:
            await ca.edit(conv, got.message_id, forged.SerializeToString())
        assert "cannot be edited" in str(edited.value)

        await ca.recall(conv, got.message_id)
        with pytest.raises(MediaRefused) as gone:
            await fetch(base, tok[b], ref, conv, got.message_id)
        assert gone.value.status == 410 and "recalled" in gone.value.reason
        # an upload another service refuses is told with its reason
        with pytest.raises(MediaRefused) as wrong:
            await upload(base, issue_dev_token(stack.token_key, 0, a, 1), b"%PDF-1.7 x", mime="image/png")
        assert wrong.value.status == 415
        await close_all(ca, cb)


async def test_large_file_in_parts_in_a_direct_chat(stack, s3_engine, tmp_path) -> None:
    """A 17 MiB file goes in presigned parts (above the SDK's 16 MiB through-the-service
    size), is sent in a direct conversation and streamed back to the peer whole and by range."""
    env = {**stack.env, **s3_engine.env(bucket="t-media-e2e-large"), "QIM_MEDIA_METRICS_LISTEN": "127.0.0.1:0"}
    a, b = users(2)
    blob = os.urandom(17 * 1024 * 1024)
    async with running_media(env) as (node, _, base):
        ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
        await ca.connect()
        await cb.connect()
        ca.media_url = cb.media_url = base
        conv = (await ca.open_direct(b)).conversation_id
        await cb.open_direct(a)
        await ca.send_media(conv, blob, name="big.bin")
        find = _media(cb, conv)
        await eventually(find, timeout=60, what="the MEDIA message reaches b")
        (got,) = await find()
        ref = decode_ref(got.body)
        assert (ref.mime, ref.size, ref.name) == ("application/octet-stream", len(blob), "big.bin")
        assert await cb.download(got) == blob
        tok = issue_dev_token(stack.token_key, 0, b, 1)
        across = (4 * 1024 * 1024 - 10, 8 * 1024 * 1024 + 10)  # over two of the service's pieces
        assert (
            await fetch(base, tok, ref, conv, got.message_id, peer=a, byte_range=across)
            == blob[across[0] : across[1] + 1]
        )
        with pytest.raises(MediaRefused) as no_peer:
            await fetch(base, tok, ref, conv, got.message_id)
        assert no_peer.value.status == 403
        await close_all(ca, cb)
