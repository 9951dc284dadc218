"""zstd payloads for the fuzz targets: valid frames, bombs, lies, skippable frames, junk.

`payload(d, max_frame)` -> (bytes, Expect): the bytes a peer could put in a COMPRESSED
body and what `decompress_bounded(bytes, max_frame)` must do with them when that is
known exactly (`Expect.size` None: only the generic properties apply). Bombs are built
without holding their content: a streaming compressor is fed one repeated block, or
the frame is written by hand as RLE blocks (4 input bytes expand to 128 KiB each).
Frame layout (RFC 8878 §3.1.1): magic 28 B5 2F FD, frame header descriptor, window
descriptor unless single-segment, dictionary id, frame content size (FCS), blocks.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable, Optional

import zstandard

from tests.fuzz.draw import Draw

MAGIC = b"\x28\xb5\x2f\xfd"
SKIPPABLE_MAGIC = 0x184D2A50  # ..0x184D2A5F
MAX_BLOCK = 128 * 1024
TOO_LARGE, BAD, REFUSED = "FrameTooLarge", "DecompressError", "refused"


@dataclass(frozen=True)
class Expect:
    """What decompress_bounded must answer: `outcome` "ok" with `size` bytes equal to
    `content()` (rebuilt only when compared), TOO_LARGE, BAD or REFUSED (either of
    them); None when unknown."""

    outcome: Optional[str] = None
    size: int = 0
    content: Optional[Callable[[], bytes]] = None


UNKNOWN = Expect()


def judged(size: int, max_frame: int, content: Callable[[], bytes]) -> Expect:
    """A well-formed frame of `size` content bytes: ok within max_frame, else too large."""
    return Expect("ok", size, content) if size <= max_frame else Expect(TOO_LARGE)


def rle_frame(blocks: int, block_size: int, byte: int, window_log: int = 17, fcs: Optional[int] = None,
              checksum: bool = False) -> bytes:
    """A hand-written frame of `blocks` RLE blocks of `block_size` copies of `byte`;
    FCS written as 8 bytes when given (it may lie), a window descriptor always."""
    fhd = (0xC0 if fcs is not None else 0) | (0x04 if checksum else 0)
    head = MAGIC + bytes([fhd, (window_log - 10) << 3])
    if fcs is not None:
        head += struct.pack("<Q", fcs)
    rle = struct.pack("<I", (block_size << 3) | (1 << 1))[:3] + bytes([byte])
    last = struct.pack("<I", (block_size << 3) | (1 << 1) | 1)[:3] + bytes([byte])
    body = rle * (blocks - 1) + last if blocks else struct.pack("<I", 1)[:3]  # empty last raw block
    return head + body + (b"\0\0\0\0" if checksum else b"")


def skippable(d: Draw) -> bytes:
    """A skippable frame (any of the 16 magics) with a short payload; sometimes its size lies."""
    data = d.blob(24)
    size = len(data) if d.chance(220) else d.choice((len(data) + 1, 0xFFFFFFFF, max(0, len(data) - 1)))
    return struct.pack("<II", SKIPPABLE_MAGIC + d.below(16), size) + data


def compressed(d: Draw, content: bytes) -> bytes:
    """`content` through python-zstandard with drawn options (content size written or
    streamed without one, level, checksum, window)."""
    level = d.between(-3, 6)
    checksum = d.chance(64)
    if d.chance(128):
        return zstandard.ZstdCompressor(level=level, write_checksum=checksum,
                                        write_content_size=d.chance(200)).compress(content)
    params = zstandard.ZstdCompressionParameters(compression_level=level, window_log=d.between(10, 27),
                                                 write_checksum=checksum)
    cobj = zstandard.ZstdCompressor(compression_params=params).compressobj()
    return cobj.compress(content) + cobj.flush()


def _repeat(block: bytes, size: int) -> bytes:
    return (block * (size // len(block) + 1))[:size]


def streamed_bomb(block: bytes, size: int, with_size: bool) -> bytes:
    """`size` bytes of `block` repeated, compressed without holding them."""
    cobj = zstandard.ZstdCompressor(level=1).compressobj(size=size if with_size else -1)
    out = []
    left = size
    while left > 0:
        out.append(cobj.compress(block[:min(left, len(block))]))
        left -= len(block)
    out.append(cobj.flush())
    return b"".join(out)


def _sizes(max_frame: int) -> tuple[int, ...]:
    return (0, 1, 300, max_frame - 1, max_frame, max_frame + 1, 2 * max_frame + 7, 1 << 22, (1 << 22) + 1,
            3 << 22, 1 << 24)


def payload(d: Draw, max_frame: int) -> tuple[bytes, Expect]:
    """One COMPRESSED body and its expected outcome (see the module doc)."""
    kind = d.below(12)
    if kind == 0:  # arbitrary bytes, sometimes behind the zstd magic
        return (MAGIC if d.chance(128) else b"") + d.blob(200), UNKNOWN
    if kind == 1:  # a well-formed frame of small or edge-sized content
        content = d.blob(300) if d.chance(160) else d.sized(max(0, d.choice(_sizes(max_frame))))
        if len(content) > 1 << 23:
            content = content[:1 << 23]
        return compressed(d, content), judged(len(content), max_frame, lambda: content)
    if kind == 2:  # bomb through the streaming compressor, content size written or not
        size = max(0, d.choice(_sizes(max_frame)))
        with_size = d.chance(128)
        block = d.sized(64 * 1024)
        return streamed_bomb(block, size, with_size), judged(size, max_frame, lambda: _repeat(block, size))
    if kind in (3, 4):  # hand-written RLE bomb, honest or lying content size
        block_size = d.choice((MAX_BLOCK, MAX_BLOCK, 1, 4096, MAX_BLOCK + 1))
        blocks = d.choice((0, 1, 31, 32, 33, 64, 1024, 8192))
        byte = d.uint(1)
        real = block_size * blocks
        fcs = None if kind == 3 else max(0, d.choice((real, 0, 100, real - 1, real + 1, max_frame, max_frame + 1, 1 << 40)))
        window_log = d.between(10, 30)
        checksum = d.chance(40)
        raw = rle_frame(blocks, block_size, byte, window_log, fcs, checksum)
        return raw, _rle_expect(real, block_size, byte, window_log, fcs, checksum, max_frame)
    if kind == 5:  # skippable frames alone, before or after a real frame
        small = zstandard.ZstdCompressor().compress(d.blob(40))
        where = d.below(3)
        if where == 0:
            return skippable(d), UNKNOWN
        return (skippable(d) + small if where == 1 else small + skippable(d)), UNKNOWN
    if kind == 6:  # two frames back to back (the second may be a bomb)
        content = d.blob(60)
        first = compressed(d, content)
        second = streamed_bomb(d.sized(64), d.choice((10, max_frame + 1)), d.chance(128)) if d.chance(128) else first
        # the first frame decides: too large, or whole and followed by bytes that are not its own
        # (an empty streamed first frame lets the size probe read on into the second: either refusal)
        if not content:
            return first + second, Expect(REFUSED)
        return first + second, Expect(BAD) if len(content) <= max_frame else Expect(TOO_LARGE)
    if kind == 7:  # truncated well-formed frame
        raw = compressed(d, d.blob(400) or b"x")
        return raw[:d.below(len(raw))], UNKNOWN
    if kind == 8:  # trailing bytes after a well-formed frame
        raw = compressed(d, d.blob(100))
        return raw + (d.blob(8) or b"\0"), UNKNOWN
    if kind == 9:  # a well-formed frame with some bytes changed
        raw = bytearray(compressed(d, d.blob(400)))
        for _ in range(d.between(1, 4)):
            raw[d.below(len(raw))] ^= d.between(1, 255)
        return bytes(raw), UNKNOWN
    if kind == 10:  # a frame whose content size field lies (patched after compression)
        content = d.blob(300) if d.chance(128) else d.sized(d.choice((70_000, max_frame + 1)))
        raw = bytearray(zstandard.ZstdCompressor(level=1).compress(content))
        fcs_at, fcs_len = _fcs_field(raw)
        lie = d.choice((0, 1, len(content) - 1, len(content) + 1, max_frame + 1, (1 << (8 * fcs_len)) - 1))
        if fcs_len == 2:
            lie = max(256, lie)
            raw[fcs_at:fcs_at + 2] = struct.pack("<H", min(lie - 256, 0xFFFF))
        elif fcs_len:
            raw[fcs_at:fcs_at + fcs_len] = (lie & ((1 << (8 * fcs_len)) - 1)).to_bytes(fcs_len, "little")
        return bytes(raw), UNKNOWN
    return d.rest()[:4096], UNKNOWN  # the rest of the input as is


def _rle_expect(real: int, block_size: int, byte: int, window_log: int, fcs: Optional[int], checksum: bool,
                max_frame: int) -> Expect:
    """The outcome of rle_frame(...): the declared size is checked first (FrameTooLarge);
    a declared size that is not the real one, and a streamed frame (no declared size)
    with a window above libzstd's 2**27, are DecompressError. With a declared size the
    output buffer is that size and the window does not matter."""
    if fcs is not None and fcs > max_frame:
        return Expect(TOO_LARGE)
    if fcs is None and window_log > 27:  # streamed through a window above libzstd's limit
        return Expect(BAD)
    if checksum:
        return UNKNOWN  # a zero checksum: corrupt unless it happens to match
    if fcs is not None and fcs != real:
        return Expect(BAD)
    if real and block_size > min(MAX_BLOCK, 1 << window_log):
        return UNKNOWN  # corrupt by the format; libzstd does not always check RLE blocks
    return judged(real, max_frame, lambda: bytes([byte]) * real)


def _fcs_field(raw: bytes | bytearray) -> tuple[int, int]:
    """(offset, length) of the frame content size field of a frame python-zstandard wrote."""
    fhd = raw[4]
    single = fhd & 0x20
    at = 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
    length = (1 if single else 0, 2, 4, 8)[fhd >> 6]
    return at, length
