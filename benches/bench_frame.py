"""Frame codec benches (docs/design.md §4): stream decoding and the 20-byte header.

frame_stream: 1,000 frames of a typical mix (a few opcodes, bodies of 0..96 bytes) in
one buffer; the same stream in 4 KiB reads (headers and bodies split across reads);
200 frames sent as 4 chunks each with two frames interleaved (reassembly path).
frame_header: encode_header and decode_header of one header.
Inputs are built once with the pure encoder; every bench checks its result.
"""

from __future__ import annotations

import pytest

from qim._core._pure import frame as pure_frame

OPCODES = (0x0103, 0x0201, 0x0303, 0x0104)
FRAMES = [(OPCODES[i % 4], i, bytes([i & 0xFF]) * (i % 97)) for i in range(1000)]
WIRE = b"".join(pure_frame.encode_frame(op, rid, body)[0] for op, rid, body in FRAMES)
READS = [WIRE[i:i + 4096] for i in range(0, len(WIRE), 4096)]


def _interleaved_chunks() -> tuple[list[bytes], list[tuple[int, int, bytes]]]:
    frames = [(0x0302, rid, bytes([rid & 0xFF]) * 1024) for rid in range(200)]
    pieces = []
    for a, b in zip(frames[::2], frames[1::2]):
        ca, cb = (pure_frame.encode_frame(*f, chunk_bytes=256) for f in (a, b))
        pieces.append(b"".join(x + y for x, y in zip(ca, cb)))
    return pieces, frames


CHUNKED, CHUNKED_FRAMES = _interleaved_chunks()


def _feed_all(decoder, pieces: list[bytes]) -> list:
    out = []
    for piece in pieces:
        out += decoder.feed(piece)
    return out


@pytest.mark.benchmark(group="frame_stream")
def test_stream_one_buffer(benchmark, core) -> None:
    frame = core("frame")
    got = benchmark(lambda: frame.FrameDecoder().feed(WIRE))
    assert got == FRAMES


@pytest.mark.benchmark(group="frame_stream")
def test_stream_4k_reads(benchmark, core) -> None:
    frame = core("frame")
    got = benchmark(lambda: _feed_all(frame.FrameDecoder(), READS))
    assert got == FRAMES


@pytest.mark.benchmark(group="frame_stream")
def test_stream_chunked_interleaved(benchmark, core) -> None:
    frame = core("frame")
    got = benchmark(lambda: _feed_all(frame.FrameDecoder(), CHUNKED))
    assert sorted(got) == CHUNKED_FRAMES


@pytest.mark.benchmark(group="frame_header")
def test_encode_header(benchmark, core) -> None:
    frame = core("frame")
    got = benchmark(frame.encode_header, 0, 0x0201, 0, 42, 5)
    assert got == pure_frame.encode_header(0, 0x0201, 0, 42, 5)


@pytest.mark.benchmark(group="frame_header")
def test_decode_header(benchmark, core) -> None:
    frame = core("frame")
    assert benchmark(frame.decode_header, WIRE[:20]) == (0, 0x0103, 0, 0, 0)
