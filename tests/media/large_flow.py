"""The cut-twice large-file end to end (issue 40 done-when: "a 200 MB file uploaded in
parts, cut twice, resumed, downloaded by another member with range requests"), shared by
the main suite's 24 MiB run (tests/media/test_media_cut.py) and the 200 MB one
(tests/scale/test_media_200mb.py, `make test-media-large`).

Through qim.sdk against the session stack, a MediaService node and the module's
s3proxy behind a CutProxy: `send_media(path)` of a random file; the proxy drops the
part upload twice in the middle of a part; the SDK asks the service which parts the
store holds and sends only the others (the proxy's byte count shows no stored part went
twice), the MEDIA message reaches the other member once, who downloads it whole
(SHA-256 of the reference) and by ranges: several, across a part boundary, an open
one, a suffix, and one outside the file (416)."""

from __future__ import annotations

import asyncio
import hashlib
import os

import pytest

from qim.consts import MESSAGE_TYPE_MEDIA
from qim.sdk.media import MediaRefused
from qim.services.media.multipart import PART_BYTES
from qim.wire.media import decode_ref
from tests.e2e.sdkclient import client, close_all
from tests.media.cutproxy import CUT, CutProxy
from tests.media.helpers import running_media
from tests.sdk.realstack import eventually, users

SLACK = 256 * 1024  # request headers and the proxy's 64 KiB reads past a threshold


def random_file(path, size: int) -> str:
    """Write `size` random bytes to `path` in 8 MiB pieces; its SHA-256 hex."""
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        for first in range(0, size, PART_BYTES):
            piece = os.urandom(min(PART_BYTES, size - first))
            digest.update(piece)
            f.write(piece)
    return digest.hexdigest()


def _read(path, offset: int, n: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(n)


async def cut_twice_resumed_and_ranged(
    stack, s3_engine, tmp_path, size: int, first_cut_part: int, second_cut_part: int, bucket: str
) -> dict:
    """Run the flow of the module doc for a file of `size` bytes, cut in the middle of
    part `first_cut_part` and then of part `second_cut_part` (1-based); returns what
    was measured (bytes through the proxy, cuts)."""
    assert 1 <= first_cut_part < second_cut_part <= -(-size // PART_BYTES)
    path = tmp_path / "big.bin"
    sha = random_file(path, size)
    # thresholds in bytes sent: half of the first cut part; then, after the resend of
    # that part from its start, half of the second cut part
    first = (first_cut_part - 1) * PART_BYTES + PART_BYTES // 2
    second = first + (second_cut_part - first_cut_part) * PART_BYTES + PART_BYTES // 2
    proxy = await CutProxy(s3_engine.endpoint.split("//", 1)[1], [(first, CUT), (second, CUT)]).start()
    env = {
        **stack.env,
        **s3_engine.env(bucket=bucket),
        "QIM_S3_ENDPOINT": proxy.endpoint,
        "QIM_MEDIA_METRICS_LISTEN": "127.0.0.1:0",
    }
    a, b = users(2)
    try:
        async with running_media(env) as (node, _, base):
            ca, cb = await client(stack, tmp_path, a), await client(stack, tmp_path, b)
            await ca.connect()
            await cb.connect()
            ca.media_urls = cb.media_urls = [base]
            conv = (await ca.create_group([b])).conversation_id
            told: list[tuple[int, int]] = []
            ack = await ca.send_media(conv, path, progress=lambda s, t: told.append((s, t)))
            assert proxy.cuts == 2 and proxy.refused >= 2, proxy  # aiohttp's own retry met the outage
            assert told[-1] == (size, size) and all(x[0] <= y[0] for x, y in zip(told, told[1:])), told[-3:]
            # every part once, plus the two halves the cuts lost: a resent stored part would add PART_BYTES
            assert size + PART_BYTES <= proxy.sent <= size + PART_BYTES + SLACK, (proxy.sent, size)
            assert await ca.pending_media() == []

            async def media() -> list:
                return [m for m in await cb.messages(conv) if m.message_type == MESSAGE_TYPE_MEDIA]

            await eventually(media, timeout=120, what="the MEDIA message reaches b")
            (got,) = await media()
            ref = decode_ref(got.body)
            assert got.message_id == ack.message_id and (ref.size, ref.sha256.hex(), ref.name) == (size, sha, "big.bin")
            ranges = {
                (0, 999): (0, 1000),
                (PART_BYTES - 10, PART_BYTES + 10): (PART_BYTES - 10, PART_BYTES + 11),  # across a part boundary
                (size - 4096, None): (size - 4096, size),  # the last bytes, open-ended
                (None, 5000): (size - 5000, size),  # a suffix
            }
            for asked, (lo, hi) in ranges.items():
                want = await asyncio.to_thread(_read, path, lo, hi - lo)
                assert await cb.download(got, byte_range=asked) == want, asked
            with pytest.raises(MediaRefused) as outside:
                await cb.download(got, byte_range=(size, size + 10))
            assert outside.value.status == 416
            whole = await cb.download(got)
            assert hashlib.sha256(whole).hexdigest() == sha and len(whole) == size
            del whole
            assert await node.objects.keys() == ["o/" + ref.media_id]
            await close_all(ca, cb)
    finally:
        await proxy.stop()
    return {"sent": proxy.sent, "cuts": proxy.cuts, "size": size}
