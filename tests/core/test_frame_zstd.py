"""Frame codec (docs/design.md §4) on both implementations: compressed frames and the
zstd limits (a bomb, a stream without a content size, the decompressed size bounded by
max_frame, every kind of bad zstd payload)."""

from __future__ import annotations

import os
import struct

import pytest
import zstandard

from qim.consts import FLAG_COMPRESSED, MAX_FRAME_BODY, STREAM_WRITE_CHUNK_BYTES
from qim.errors import DecompressError, FrameTooLarge

from .test_frame import hdr


def test_compressed_frame_is_smaller_on_the_wire(frame) -> None:
    body = b"hello world " * 50_000
    plain = frame.encode_frame(0x0501, 1, body)
    packed = frame.encode_frame(0x0501, 1, body, compress=True)
    assert sum(map(len, packed)) < sum(map(len, plain)) // 20
    assert frame.FrameDecoder().feed(b"".join(packed)) == [(0x0501, 1, body)]


def _compressed_frame(payload: bytes, opcode=0x0501, rid=1) -> bytes:
    assert len(payload) <= STREAM_WRITE_CHUNK_BYTES
    return hdr(FLAG_COMPRESSED, opcode, 0, rid, len(payload)) + payload


@pytest.mark.parametrize("content_size", [True, False])
def test_zstd_bomb_is_frame_too_large(frame, content_size) -> None:
    bomb = zstandard.ZstdCompressor(write_content_size=content_size).compress(
        bytes(MAX_FRAME_BODY + 1))
    if not content_size:
        assert zstandard.frame_content_size(bomb) == -1
    dec = frame.FrameDecoder()
    with pytest.raises(FrameTooLarge):
        dec.feed(_compressed_frame(bomb))
    with pytest.raises(FrameTooLarge):
        dec.feed(b"")


def test_streamed_zstd_without_content_size_within_limit(frame) -> None:
    cobj = zstandard.ZstdCompressor().compressobj()
    payload = cobj.compress(b"abc" * 1000) + cobj.flush()
    assert zstandard.frame_content_size(payload) == -1
    assert frame.FrameDecoder().feed(_compressed_frame(payload)) == [(0x0501, 1, b"abc" * 1000)]
    with pytest.raises(FrameTooLarge):
        frame.FrameDecoder(max_frame=2999).feed(_compressed_frame(payload))


def test_decompressed_size_bounded_by_max_frame(frame) -> None:
    payload = zstandard.ZstdCompressor().compress(b"z" * 2000)
    assert frame.FrameDecoder(max_frame=2000).feed(_compressed_frame(payload))[0][2] == b"z" * 2000
    with pytest.raises(FrameTooLarge):
        frame.FrameDecoder(max_frame=1999).feed(_compressed_frame(payload))


@pytest.mark.parametrize("mutate", ["truncate", "trailing", "garbage", "empty", "lying_size"])
def test_bad_zstd_is_decompress_error(frame, mutate) -> None:
    good = zstandard.ZstdCompressor().compress(os.urandom(500) * 10)
    payload = {
        "truncate": good[:-5],
        "trailing": good + b"\x00\x01",
        "garbage": b"not zstd at all",
        "empty": b"",
        "lying_size": bytearray(good),
    }[mutate]
    if mutate == "lying_size":  # declare 300 bytes of content for 5000 real ones
        fhd = payload[4]
        assert fhd & 0x20 and fhd >> 6 == 1  # single segment, 2-byte FCS right after FHD
        payload[5:7] = struct.pack("<H", 300 - 256)
        payload = bytes(payload)
        assert zstandard.frame_content_size(payload) == 300
    with pytest.raises(DecompressError):
        frame.FrameDecoder().feed(_compressed_frame(payload))
