"""Frame codec (docs/design.md §4) on both implementations: round trips, partial reads,
chunking and interleaving, every header fault, poisoning, at_boundary. The zstd limits:
test_frame_zstd.py; compiled against pure on random streams: test_frame_differential.py."""

from __future__ import annotations

import os
import struct
import zlib

import pytest

from qim.consts import FLAG_COMPRESSED, FLAG_MORE, MAX_FRAME_BODY
from qim.errors import (
    BadCrc,
    BadFlags,
    BadMagic,
    BadVersion,
    ChunkOrder,
    ChunkTooLarge,
    FrameTooLarge,
    TruncatedFrame,
)

# Hand-built wire bytes, written out literally (not produced by code):
# PING opcode 0x0103, request_id 1, empty body.
PING_1 = b"\x51\x49\x01\x00\x01\x03\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x94\x2b\x9c\x1a"
# SEND_ACK-ish opcode 0x0201, request_id 42, body b"hello".
HELLO_42 = (b"\x51\x49\x01\x00\x02\x01\x00\x00\x00\x00\x00\x2a\x00\x00\x00\x05\x7d\xa2\x1d\xb1"
            b"hello")
# opcode 0x0302, request_id 9 in two chunks: MORE + b"ab", then chunk 1 + b"c".
TWO_CHUNKS = (b"\x51\x49\x01\x02\x03\x02\x00\x00\x00\x00\x00\x09\x00\x00\x00\x02\x07\xbc\x42\xe3"
              b"ab"
              b"\x51\x49\x01\x00\x03\x02\x00\x01\x00\x00\x00\x09\x00\x00\x00\x01\xe9\x92\xb2\x51"
              b"c")


def hdr(flags, opcode, index, rid, blen, magic=0x5149, version=1, crc=None) -> bytes:
    pre = struct.pack(">HBBHHII", magic, version, flags, opcode, index, rid, blen)
    return pre + struct.pack(">I", zlib.crc32(pre) if crc is None else crc)


def feed_all(dec, pieces) -> list:
    out = []
    for p in pieces:
        out += dec.feed(p)
    return out


def test_literal_frames(frame) -> None:
    assert frame.encode_header(0, 0x0103, 0, 1, 0) == PING_1
    assert frame.encode_frame(0x0201, 42, b"hello") == [HELLO_42]
    assert frame.decode_header(HELLO_42) == (0, 0x0201, 0, 42, 5)
    assert frame.encode_frame(0x0302, 9, b"abc", chunk_bytes=2) == [TWO_CHUNKS[:22], TWO_CHUNKS[22:]]
    dec = frame.FrameDecoder()
    assert dec.feed(PING_1 + HELLO_42 + TWO_CHUNKS) == [
        (0x0103, 1, b""), (0x0201, 42, b"hello"), (0x0302, 9, b"abc")]
    assert dec.at_boundary()


@pytest.mark.parametrize("size", [0, 1, 100, 65535, 65536, 65537, 300_000])
@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("chunk_bytes", [1000, 65536])
def test_round_trip(frame, size, compress, chunk_bytes) -> None:
    body = (os.urandom(64) * (size // 64 + 1))[:size]
    chunks = frame.encode_frame(0x0501, 123, body, compress=compress, chunk_bytes=chunk_bytes)
    for i, c in enumerate(chunks):
        flags, op, idx, rid, blen = frame.decode_header(c)
        assert (op, idx, rid, blen) == (0x0501, i, 123, len(c) - 20)
        assert blen <= chunk_bytes
        assert bool(flags & FLAG_COMPRESSED) == compress
        assert bool(flags & FLAG_MORE) == (i + 1 < len(chunks))
    dec = frame.FrameDecoder()
    assert feed_all(dec, chunks) == [(0x0501, 123, body)]
    assert dec.at_boundary() and dec.buffered == 0


def test_partial_reads_byte_by_byte(frame) -> None:
    frames = [(0x0101, 1, b"auth"), (0x0103, 2, b""), (0x0301, 3, bytes(range(256)) * 3)]
    wire = b"".join(b"".join(frame.encode_frame(op, rid, body, chunk_bytes=100))
                    for op, rid, body in frames)
    dec = frame.FrameDecoder()
    got = []
    for i in range(len(wire)):
        got += dec.feed(wire[i:i + 1])
        if i < 19:
            assert not dec.at_boundary() and dec.buffered == i + 1
    assert got == frames
    assert dec.at_boundary() and dec.buffered == 0


def test_four_mib_frame_in_64_chunks_with_pongs_between(frame) -> None:
    body = os.urandom(MAX_FRAME_BODY)
    chunks = frame.encode_frame(0x0502, 77, body)
    assert len(chunks) == 64 and all(len(c) == 20 + 65536 for c in chunks)
    pong = frame.encode_frame(0x0104, 0, b"")[0]
    dec = frame.FrameDecoder()
    got = []
    for i, c in enumerate(chunks):
        got += dec.feed(c + pong)
        if i < 63:
            assert not dec.at_boundary()
            assert dec.buffered == (i + 1) * 65536
    assert got == [(0x0104, 0, b"")] * 63 + [(0x0502, 77, body), (0x0104, 0, b"")]
    assert dec.at_boundary()
    # the same stream in odd-sized reads
    wire = b"".join(chunks)
    dec = frame.FrameDecoder()
    assert feed_all(dec, [wire[i:i + 99_991] for i in range(0, len(wire), 99_991)]) == [
        (0x0502, 77, body)]


def test_interleaved_chunks_of_two_frames(frame) -> None:
    a = frame.encode_frame(0x0301, 1, b"A" * 5000, chunk_bytes=1000)
    b = frame.encode_frame(0x0301, 2, b"B" * 3000, compress=True, chunk_bytes=7)
    dec = frame.FrameDecoder()
    got = []
    for i in range(max(len(a), len(b))):
        for src in (b, a):
            if i < len(src):
                got += dec.feed(src[i])
    assert sorted(got) == [(0x0301, 1, b"A" * 5000), (0x0301, 2, b"B" * 3000)]
    assert dec.at_boundary()


def test_same_request_id_other_opcode_is_another_frame(frame) -> None:
    a = frame.encode_frame(0x0301, 5, b"x" * 30, chunk_bytes=10)
    b = frame.encode_frame(0x0302, 5, b"y" * 30, chunk_bytes=10)
    dec = frame.FrameDecoder()
    got = feed_all(dec, [a[0], b[0], a[1], b[1], b[2], a[2]])
    assert got == [(0x0302, 5, b"y" * 30), (0x0301, 5, b"x" * 30)]


BAD_HEADERS = [
    (hdr(0, 1, 0, 1, 0, magic=0x5148), BadMagic),
    (hdr(0, 1, 0, 1, 0, crc=0), BadCrc),
    (hdr(0, 1, 0, 1, 0, version=0), BadVersion),
    (hdr(0, 1, 0, 1, 0, version=2), BadVersion),
    (hdr(4, 1, 0, 1, 0), BadFlags),  # NEED_ACK reserved
    (hdr(8, 1, 0, 1, 0), BadFlags),
    (hdr(0xF0, 1, 0, 1, 0), BadFlags),
    (hdr(0, 1, 0, 1, 65537), ChunkTooLarge),
    (hdr(1, 1, 0, 1, 1 << 31), ChunkTooLarge),
]


@pytest.mark.parametrize("raw,exc", BAD_HEADERS)
def test_bad_header_errors_and_poisons(frame, raw, exc) -> None:
    with pytest.raises(exc) as info:
        frame.decode_header(raw)
    assert type(info.value) is exc
    dec = frame.FrameDecoder()
    assert dec.feed(PING_1) == [(0x0103, 1, b"")]
    with pytest.raises(exc):
        dec.feed(raw)
    for _ in range(2):  # poisoned: every later feed raises the same class again
        with pytest.raises(exc):
            dec.feed(PING_1)


def test_error_after_good_frame_in_same_feed_still_raises(frame) -> None:
    dec = frame.FrameDecoder()
    with pytest.raises(BadMagic):
        dec.feed(PING_1 + b"\x00" * 20)


def test_check_order_magic_crc_version_flags(frame) -> None:
    with pytest.raises(BadMagic):
        frame.decode_header(hdr(4, 1, 0, 1, 1 << 20, magic=1, version=3, crc=0))
    with pytest.raises(BadCrc):
        frame.decode_header(hdr(4, 1, 0, 1, 1 << 20, version=3, crc=0))
    with pytest.raises(BadVersion):
        frame.decode_header(hdr(4, 1, 0, 1, 1 << 20, version=3))
    with pytest.raises(BadFlags):
        frame.decode_header(hdr(4, 1, 0, 1, 1 << 20))


def test_decode_header_truncated_and_offset(frame) -> None:
    for n in range(20):
        with pytest.raises(TruncatedFrame):
            frame.decode_header(PING_1[:n])
    assert frame.decode_header(b"\xff" * 7 + PING_1, 7) == (0, 0x0103, 0, 1, 0)
    assert frame.decode_header(bytearray(PING_1)) == (0, 0x0103, 0, 1, 0)
    with pytest.raises(TruncatedFrame):
        frame.decode_header(PING_1, 1)
    with pytest.raises(TruncatedFrame):
        frame.decode_header(PING_1, 10**30)
    with pytest.raises(ValueError):
        frame.decode_header(PING_1, -1)
    with pytest.raises(TypeError):
        frame.decode_header("not bytes")


def test_chunk_order_faults(frame) -> None:
    c = frame.encode_frame(0x0301, 4, b"q" * 30, chunk_bytes=10)
    cases = [[c[1]], [c[0], c[2]], [c[0], c[0]], [c[0], c[1], c[1]]]
    for pieces in cases:
        with pytest.raises(ChunkOrder):
            feed_all(frame.FrameDecoder(), pieces)
    mixed = frame.encode_frame(0x0301, 4, b"q" * 30, compress=True, chunk_bytes=10)
    with pytest.raises(ChunkOrder):  # COMPRESSED differs between chunks of one frame
        feed_all(frame.FrameDecoder(), [c[0], mixed[1]])


def test_too_many_open_frames(frame) -> None:
    dec = frame.FrameDecoder(max_partial_frames=3)
    firsts = [frame.encode_frame(0x0301, rid, b"x" * 20, chunk_bytes=10)[0] for rid in range(4)]
    feed_all(dec, firsts[:3])
    assert not dec.at_boundary() and dec.buffered == 30
    with pytest.raises(ChunkOrder):
        dec.feed(firsts[3])


def test_reassembled_body_too_large(frame) -> None:
    chunks = frame.encode_frame(0x0301, 4, b"q" * 150, chunk_bytes=50)
    dec = frame.FrameDecoder(max_frame=100)
    assert dec.feed(chunks[0] + chunks[1]) == []
    with pytest.raises(FrameTooLarge):
        dec.feed(chunks[2])
    with pytest.raises(FrameTooLarge):
        frame.FrameDecoder(max_frame=10).feed(frame.encode_frame(1, 1, b"x" * 11)[0])
    assert frame.FrameDecoder(max_frame=0).feed(PING_1) == [(0x0103, 1, b"")]


def test_at_boundary_and_buffered(frame) -> None:
    dec = frame.FrameDecoder()
    assert dec.at_boundary() and dec.buffered == 0
    dec.feed(HELLO_42[:5])
    assert not dec.at_boundary() and dec.buffered == 5
    dec.feed(HELLO_42[5:22])  # header complete, body partial
    assert not dec.at_boundary() and dec.buffered == 22
    assert dec.feed(HELLO_42[22:]) == [(0x0201, 42, b"hello")]
    assert dec.at_boundary()
    dec.feed(TWO_CHUNKS[:22])  # an open reassembly holds bytes but no stream bytes
    assert not dec.at_boundary() and dec.buffered == 2
    assert dec.feed(TWO_CHUNKS[22:]) == [(0x0302, 9, b"abc")]
    assert dec.at_boundary() and dec.buffered == 0
    empty_more = hdr(FLAG_MORE, 7, 0, 7, 0)
    dec.feed(empty_more)
    assert not dec.at_boundary() and dec.buffered == 0


def test_encode_frame_limits(frame) -> None:
    with pytest.raises(FrameTooLarge):
        frame.encode_frame(1, 1, bytes(MAX_FRAME_BODY + 1))
    with pytest.raises(FrameTooLarge):
        frame.encode_frame(1, 1, bytes(MAX_FRAME_BODY + 1), compress=True)
    with pytest.raises(FrameTooLarge):  # incompressible data grows under zstd
        frame.encode_frame(1, 1, os.urandom(MAX_FRAME_BODY), compress=True)
    with pytest.raises(ValueError):
        frame.encode_frame(1, 1, b"x" * 70_000, chunk_bytes=1)  # > 65536 chunks
    for bad in (0, 65537, -1):
        with pytest.raises(ValueError):
            frame.encode_frame(1, 1, b"x", chunk_bytes=bad)
    with pytest.raises(ValueError):
        frame.encode_frame(1 << 16, 1, b"x")
    with pytest.raises(ValueError):
        frame.encode_frame(1, 1 << 32, b"x")
    with pytest.raises(TypeError):
        frame.encode_frame(1, 1, "text")
    assert len(frame.encode_frame(1, 1, bytes(65536 * 2), chunk_bytes=65536)) == 2
    assert len(frame.encode_frame(1, 1, b"x" * 65536, chunk_bytes=1)) == 65536


def test_encode_header_checks(frame) -> None:
    assert len(frame.encode_header(3, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 65536)) == 20
    with pytest.raises(BadFlags):
        frame.encode_header(4, 1, 0, 0, 0)
    with pytest.raises(ChunkTooLarge):
        frame.encode_header(0, 1, 0, 0, 1 << 40)
    with pytest.raises(ValueError):
        frame.encode_header(-1, 1, 0, 0, 0)
    with pytest.raises(TypeError):
        frame.encode_header(0, 1.0, 0, 0, 0)


def test_decoder_arguments(frame) -> None:
    for kwargs in ({"max_frame": -1}, {"max_partial_frames": 0}, {"max_frame": 1 << 40}):
        with pytest.raises(ValueError):
            frame.FrameDecoder(**kwargs)
    with pytest.raises(TypeError):
        frame.FrameDecoder().feed("text")
    assert frame.FrameDecoder().feed(memoryview(PING_1)) == [(0x0103, 1, b"")]


def test_many_small_frames_in_one_buffer(frame) -> None:
    # speed is measured in benches/ (make bench); this checks the results only
    n = 50_000
    wire = b"".join(frame.encode_frame(0x0103 + i % 3, i, b"p%d" % i)[0] for i in range(n))
    expect = [(0x0103 + i % 3, i, b"p%d" % i) for i in range(n)]
    dec = frame.FrameDecoder()
    assert dec.feed(wire) == expect and dec.at_boundary()
    # also fed in 4 KiB reads that split headers and bodies everywhere
    dec = frame.FrameDecoder()
    assert feed_all(dec, [wire[i:i + 4093] for i in range(0, len(wire), 4093)]) == expect
    assert dec.at_boundary() and dec.buffered == 0
