"""`qimctl audit media` on real engines (issue 40; docs/decisions/0139): 0/0 and exit 0 on
a clean store (a sent upload, a young unsent one), then a planted object without a record
and a planted record without its object are each found, counted and named, exit 1; a
store it cannot reach is exit 2 with the reason."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time

from tests.media.helpers import declared, photo_with_gps, running_media, token


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
