"""The issue 40 done-when as written: a 200 MB file uploaded in parts through qim.sdk, its
part upload cut twice mid-part, resumed with only the missing parts, downloaded by
another member whole and by ranges (the flow and its checks: tests/media/large_flow.py;
the main suite runs it at 24 MiB, tests/media/test_media_cut.py). Run by
`make test-media-large` (and `make test-scale`): minutes on a busy 2-core machine."""

from __future__ import annotations

import time

from tests.media.conftest import s3_engine  # noqa: F401 — the module's private s3proxy
from tests.media.large_flow import cut_twice_resumed_and_ranged

SIZE = 200 * 1024 * 1024  # 25 parts of 8 MiB


async def test_200_mb_cut_twice_resumed_and_downloaded_by_ranges(stack, s3_engine, tmp_path) -> None:  # noqa: F811
    began = time.monotonic()
    got = await cut_twice_resumed_and_ranged(stack, s3_engine, tmp_path, SIZE, 6, 17, "t-media-200mb")
    print(f"\n200 MB cut twice: {got['sent']} bytes sent for {SIZE}, {time.monotonic() - began:.0f} s in all")
    assert got["cuts"] == 2
