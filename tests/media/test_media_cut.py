"""A 24 MiB file in parts through qim.sdk, its part upload cut twice mid-part, resumed
with only the missing parts and downloaded by another member by ranges (issue 40; the
flow and its checks: tests/media/large_flow.py; the 200 MB run of the same flow is
`make test-media-large`)."""

from __future__ import annotations

from tests.media.large_flow import cut_twice_resumed_and_ranged

SIZE = 24 * 1024 * 1024  # three parts of 8 MiB


async def test_cut_twice_resumed_and_downloaded_by_ranges(stack, s3_engine, tmp_path) -> None:
    got = await cut_twice_resumed_and_ranged(stack, s3_engine, tmp_path, SIZE, 2, 3, "t-media-cut")
    assert got["cuts"] == 2
