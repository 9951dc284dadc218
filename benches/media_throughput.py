"""What the MediaService spends per MB and how fast files go through it (issue 40): a
private s3proxy and Redis (qim/dev), one MediaNode in this process, and an HTTP client
in the same process (so the CPU figures include the client's share: an upper bound).

It prints, for `--photos` JPEG photos of `--px` pixels on the longer side (EXIF GPS
stripped, a thumbnail made), the service's CPU per photo and per MB (inspect() alone,
the Pillow work, measured in a thread); then the wall-clock throughput of `--files`
uploads of `--mb` MB octet-stream files through `POST /v1/media` and of their
downloads (`GET`, streamed in 4 MiB pieces); and of one `--large-mb` MB file in
presigned parts (the device writes to s3proxy directly; the service only reads it back
to check the SHA-256); then downloads through the service with qim.sdk's `fetch`: the
files whole (streamed in 4 MiB pieces, hashed by the client) and `--ranges` random 1 MiB
ranges. The download figures leave out the access check (patched to let anyone in: it
needs a message in a real conversation; its cost is two reads of Redis per request).

    .venv/bin/python benches/media_throughput.py --photos 20 --files 10 --mb 8 --large-mb 64 --ranges 50

Engines are stopped by pid at the end; their data is under a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.media.helpers

from qim.dev.redis_engine import start_redis
from qim.dev.s3_engine import start_s3
from qim.proto.v1.media_pb2 import MediaRef
from qim.sdk.media import fetch, upload_large
from qim.services.media import node as media_node
from qim.services.media.inspect import inspect
from qim.wire.tokens import SigningKey, issue_token
from tests.media.helpers import declared, photo_with_gps, running_media


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


async def bench(args: argparse.Namespace, env: dict[str, str], key: SigningKey) -> None:
    """Run the three measurements (module doc) and print them."""
    photo = photo_with_gps(args.px, args.px * 3 // 4)
    sha = hashlib.sha256(photo).hexdigest()
    c0 = _cpu()
    for _ in range(args.photos):
        await asyncio.to_thread(inspect, photo, len(photo), sha, "image/jpeg")
    cpu = (_cpu() - c0) / args.photos
    print(
        f"photo {args.px}x{args.px * 3 // 4} ({len(photo) / 1e6:.2f} MB): inspect {cpu * 1000:.0f} ms CPU each, "
        f"{cpu / (len(photo) / 1e6) * 1000:.0f} ms CPU per MB"
    )
    bearer = {"Authorization": "Bearer " + issue_token(key, 0, 7, 1, audience="qim", issuer="qim-dev", ttl_s=3600)}
    blob = os.urandom(int(args.mb * 1e6))
    async with running_media(env) as (node, http, base):
        t0, c0 = time.monotonic(), _cpu()
        ids = []
        for _ in range(args.files):
            async with http.post(
                f"{base}/v1/media", data=blob, headers={**bearer, **declared(blob, "application/octet-stream")}
            ) as r:
                assert r.status == 201, await r.text()
                ids.append((await r.json())["media_id"])
        up_s, up_cpu = time.monotonic() - t0, _cpu() - c0
        t0 = time.monotonic()
        for media_id in ids:
            assert await node.objects.get("o/" + media_id) == blob
        down_s = time.monotonic() - t0
        total = args.files * len(blob) / 1e6
        print(
            f"upload through the service: {args.files} x {args.mb} MB in {up_s:.1f} s = {total / up_s:.1f} MB/s "
            f"({up_cpu / total * 1000:.0f} ms CPU per MB, client included)"
        )
        print(f"read back from the store: {total / down_s:.1f} MB/s")
        large = os.urandom(int(args.large_mb * 1e6))
        t0, c0 = time.monotonic(), _cpu()
        await upload_large(base, bearer["Authorization"].split()[1], large)
        large_s, large_cpu = time.monotonic() - t0, _cpu() - c0
        print(
            f"presigned parts: {args.large_mb} MB in {large_s:.1f} s = {args.large_mb / large_s:.1f} MB/s "
            f"(parts written, joined, read back and hashed; {large_cpu / args.large_mb * 1000:.0f} ms CPU per MB, "
            f"client included)"
        )
        await downloads(args, base, bearer["Authorization"].split()[1], blob, ids)


async def _anyone(*_: object) -> None:
    """The access check, left out of the download figures (module doc)."""


async def downloads(args: argparse.Namespace, base: str, bearer: str, blob: bytes, ids: list[str]) -> None:
    """Whole downloads of the uploaded files through the service (qim.sdk fetch: GET,
    streamed in 4 MiB pieces, SHA-256 checked by the client), then `--ranges` random
    1 MiB ranges of them."""
    media_node.check_download = _anyone  # type: ignore[assignment]
    conv, msg = os.urandom(16), os.urandom(16)
    refs = [MediaRef(media_id=m, sha256=hashlib.sha256(blob).digest()) for m in ids]
    t0, c0 = time.monotonic(), _cpu()
    for ref in refs:
        assert await fetch(base, bearer, ref, conv, msg) == blob
    down_s, down_cpu = time.monotonic() - t0, _cpu() - c0
    total = len(refs) * len(blob) / 1e6
    print(
        f"download through the service: {len(refs)} x {args.mb} MB in {down_s:.1f} s = {total / down_s:.1f} MB/s "
        f"({down_cpu / total * 1000:.0f} ms CPU per MB, client and its SHA-256 included)"
    )
    piece, rng = 1024 * 1024, random.Random(7)
    t0, c0 = time.monotonic(), _cpu()
    for i in range(args.ranges):
        first = rng.randrange(0, len(blob) - piece)
        got = await fetch(base, bearer, refs[i % len(refs)], conv, msg, byte_range=(first, first + piece - 1))
        assert got == blob[first : first + piece]
    range_s, range_cpu = time.monotonic() - t0, _cpu() - c0
    print(
        f"1 MiB ranges through the service: {args.ranges / range_s:.0f} per s = "
        f"{args.ranges * piece / 1e6 / range_s:.1f} MB/s ({range_cpu / (args.ranges * piece / 1e6) * 1000:.0f} ms "
        f"CPU per MB)"
    )


def main() -> None:
    """Parse the arguments, start the engines, run, stop them."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--photos", type=int, default=20)
    p.add_argument("--px", type=int, default=1920)
    p.add_argument("--files", type=int, default=10)
    p.add_argument("--mb", type=float, default=8)
    p.add_argument("--large-mb", type=float, default=64)
    p.add_argument("--ranges", type=int, default=50)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="qim-media-bench-") as d:
        s3, redis = start_s3(Path(d) / "s3", die_with_parent=True), start_redis(Path(d) / "redis", die_with_parent=True)
        try:
            key = SigningKey.generate()
            (Path(d) / "pub.pem").write_bytes(key.verify_key().public_pem())
            env = {
                **s3.env("bench-media"),
                "QIM_REDIS_ADDR": redis.addr,
                "QIM_KAFKA_BOOTSTRAP": "127.0.0.1:1",
                "QIM_TOKEN_PUBLIC_KEYS": str(Path(d) / "pub.pem"),
                "QIM_MEDIA_REF_KEY": "b" * 40,
                "QIM_MEDIA_METRICS_LISTEN": "127.0.0.1:0",
                "QIM_MEDIA_QUOTA_BYTES_PER_DAY": str(1 << 40),
                "QIM_MEDIA_MAX_FILE_BYTES": str(64 * 1024 * 1024),
            }
            asyncio.run(bench(args, env, key))
        finally:
            s3.stop()
            redis.stop()


if __name__ == "__main__":
    main()
