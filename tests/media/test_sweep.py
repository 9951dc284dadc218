"""The media sweeper on real engines (issue 40; docs/decisions/0139): with a short
QIM_MEDIA_ORPHAN_MS, an upload never sent is deleted from the store (and a late send of it
refused), a sent one stays and downloads, a recalled one is deleted; one node sweeps at a
time (the lease); and `qimctl audit media` (0/0 and exit 0 on a clean store, a planted
object without a record and a planted record without its object each found, counted and
named, exit 1; a store it cannot reach exit 2). One module: one s3proxy start for both."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time

import pytest

from qim.consts import MESSAGE_TYPE_MEDIA
from qim.sdk.events import ServerError
from qim.sdk.media import upload
from qim.stores.s3 import ObjectMissing
from qim.wire.devtoken import issue_dev_token
from qim.wire.media import decode_ref
from tests.e2e.sdkclient import client, close_all
from tests.media.helpers import declared, photo_with_gps, running_media, token
from tests.sdk.realstack import eventually, users

ORPHAN_MS = 10_000  # long enough for a busy machine to upload and send within it


def media_id(message) -> str:
    """The media_id a MEDIA message carries."""
    return decode_ref(message.body).media_id


async def _gone(node, media_id: str) -> bool:
    try:
        await node.objects.size("o/" + media_id)
    except ObjectMissing:
        return await node.ledger.get(0, media_id) is None
    return False


async def test_orphan_deleted_sent_kept_recalled_deleted(stack, s3_engine, tmp_path) -> None:
    env = {
        **stack.env,
        **s3_engine.env(bucket="t-media-sweep"),
        "QIM_MEDIA_METRICS_LISTEN": "127.0.0.1:0",
        "QIM_MEDIA_ORPHAN_MS": str(ORPHAN_MS),
        "QIM_MEDIA_SWEEP_INTERVAL_MS": "300",
    }
    a, b = users(2)
    async with running_media(env) as (node, _, base):
        ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
        await ca.connect()
        await cb.connect()
        ca.media_url = cb.media_url = base
        conv = (await ca.open_direct(b)).conversation_id
        await cb.open_direct(a)
        tok = issue_dev_token(stack.token_key, 0, a, 1)
        orphan = await upload(base, tok, os.urandom(3000), name="never.bin")
        kept = await ca.send_media(conv, photo_with_gps(), name="kept.jpg")
        recalled = await upload(base, tok, os.urandom(2000), name="recalled.bin")
        ack = await ca.send(conv, recalled.body, MESSAGE_TYPE_MEDIA)
        await ca.recall(conv, ack.message_id)

        await eventually(lambda: _gone(node, orphan.ref.media_id), timeout=90, what="the orphan upload is swept")
        await eventually(lambda: _gone(node, recalled.ref.media_id), timeout=90, what="the recalled media is swept")
        # the sent one outlives the sweeps past its window, and downloads
        await node.sweeper.sweep_once()

        async def received():
            return [m for m in await cb.messages(conv) if m.message_id == kept.message_id]

        await eventually(received, timeout=60, what="b has the kept MEDIA message")
        (got,) = await received()
        data = await cb.download(got)
        assert len(data) > 1000 and data == await node.objects.get("o/" + media_id(got))
        # a late send of the swept upload is refused with the reason
        with pytest.raises(ServerError) as late:
            await ca.send(conv, orphan.body, MESSAGE_TYPE_MEDIA)
        assert "gone" in str(late.value)
        assert node.sweeper.deleted.labels("orphan")._value.get() >= 1
        await close_all(ca, cb)


async def test_a_recalled_photo_goes_at_the_next_sweep_however_young(stack, s3_engine, tmp_path) -> None:
    """The orphan window keeps an upload not sent yet; it never kept a recalled one (what a
    newcomer found: a photo recalled right after its upload stayed in the store an hour)."""
    env = {**stack.env, **s3_engine.env(bucket="t-media-young"), "QIM_MEDIA_METRICS_LISTEN": "127.0.0.1:0",
           "QIM_MEDIA_ORPHAN_MS": "3600000", "QIM_MEDIA_SWEEP_INTERVAL_MS": "3600000"}
    a, b = users(2)
    async with running_media(env) as (node, _, base):
        ca = await client(stack, tmp_path, a)
        await ca.connect()
        ca.media_url = base
        conv = (await ca.open_direct(b)).conversation_id
        tok = issue_dev_token(stack.token_key, 0, a, 1)
        unsent = await upload(base, tok, os.urandom(1500), name="later.bin")
        photo = await upload(base, tok, photo_with_gps(), name="oops.jpg")
        ack = await ca.send(conv, photo.body, MESSAGE_TYPE_MEDIA)
        await ca.recall(conv, ack.message_id)
        result = await node.sweeper.sweep_once()
        assert photo.ref.media_id in result.released, result
        assert await _gone(node, photo.ref.media_id)
        assert not await _gone(node, unsent.ref.media_id)  # young and not sent: kept for its hour
        await close_all(ca)


async def test_one_node_sweeps_at_a_time(s3_engine, media_env) -> None:
    env, _ = media_env
    async with running_media({**env, "QIM_MEDIA_SWEEP_INTERVAL_MS": "86400000"}) as (node, _, _base):
        assert await node.ledger.lease(0, "node-a", 60_000)
        assert not await node.ledger.lease(0, "node-b", 60_000)
        assert await node.ledger.lease(0, "node-a", 60_000)  # the holder renews


def _audit(env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "qim.cli.qimctl", "audit", "media", *extra],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_audit_media_clean_then_finds_both_kinds(media_env) -> None:
    env, key = media_env
    env = {**env, "QIM_MEDIA_SWEEP_INTERVAL_MS": "86400000"}
    async with running_media(env) as (node, http, base):
        photo = photo_with_gps()
        ids = []
        for _ in range(2):
            async with http.post(
                base + "/v1/media", data=photo, headers={**token(key, 7), **declared(photo, "image/jpeg")}
            ) as r:
                assert r.status == 201, await r.text()
                ids.append((await r.json())["media_id"])
        sent, young = ids
        assert await node.ledger.refer(0, sent, "m:" + "ab" * 16 + ":" + "cd" * 16)  # as the writer marks a send

        clean = _audit(env)
        assert clean.returncode == 0, clean.stdout + clean.stderr
        assert "objects=2 records=2 references_without_objects=0 objects_without_references=0" in clean.stdout

        stray = secrets.token_hex(16)
        await node.objects.put("o/" + stray, b"nobody sent this")
        lost = secrets.token_hex(16)
        fields = {
            "owner": "7",
            "device": "1",
            "key": "o/" + lost,
            "mime": "application/octet-stream",
            "size": "3",
            "sha256": "00" * 32,
            "created_ms": str(int(time.time() * 1000) - 7_200_000),
        }
        await node.ledger.record(0, lost, fields)
        assert await node.ledger.refer(0, lost, "m:" + "ab" * 16 + ":" + "ef" * 16)

        found = _audit(env)
        assert found.returncode == 1, found.stdout + found.stderr
        assert "references_without_objects=1 objects_without_references=0" in found.stdout  # stray is young
        assert f"reference without object: {lost}" in found.stdout
        found = _audit(env, "--orphan-ms", "0")  # the young unsent upload and the stray count now
        assert found.returncode == 1
        assert "references_without_objects=1 objects_without_references=2" in found.stdout, found.stdout
        assert f"object without reference: o/{stray}" in found.stdout
        assert f"object without reference: o/{young}" in found.stdout


def test_audit_media_unreachable_store_is_exit_2(media_env) -> None:
    env, _ = media_env
    bad = _audit({**env, "QIM_S3_ENDPOINT": "http://127.0.0.1:1"})
    assert bad.returncode == 2 and "cannot run" in bad.stderr, bad.stdout + bad.stderr
