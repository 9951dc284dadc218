"""Frame codec, pure-Python twin (docs/design.md §4).

Header, 20 bytes big-endian:
  0 magic u16 = 0x5149 | 2 version u8 = 1 | 3 flags u8 (bit0 COMPRESSED, bit1 MORE,
  bit2 NEED_ACK reserved = 0) | 4 opcode u16 | 6 chunk_index u16 | 8 request_id u32
  | 12 body_len u32 (<= 64 KiB) | 16 header_crc u32 = zlib.crc32(bytes 0..15)
A frame is compressed whole (zstd, flag on every chunk), then split into chunks of at
most 64 KiB; chunks of different frames may interleave, reassembly is keyed by
(opcode, request_id). Reassembled and decompressed bodies are bounded by max_frame
(4 MiB). Any FrameError poisons the decoder: there is no resync.
"""

from __future__ import annotations

import struct
import zlib

from qim._core.zstd_bound import compressor as zstd_compressor
from qim._core.zstd_bound import decompress as zstd_decompress
from qim.consts import (
    FLAG_COMPRESSED,
    FLAG_MORE,
    FLAGS_KNOWN,
    FRAME_HEADER_LEN,
    FRAME_MAGIC,
    FRAME_VERSION,
    MAX_FRAME_BODY,
    STREAM_WRITE_CHUNK_BYTES,
)
from qim.errors import (
    BadCrc,
    BadFlags,
    BadMagic,
    BadVersion,
    ChunkOrder,
    ChunkTooLarge,
    FrameError,
    FrameTooLarge,
    TruncatedFrame,
)

from ._util import as_bytes, check_int

_PRE = struct.Struct(">HBBHHII")
_CRC = struct.Struct(">I")
assert _PRE.size + _CRC.size == FRAME_HEADER_LEN
_U16 = 0xFFFF
_U32 = 0xFFFFFFFF
_MAX_CHUNKS = _U16 + 1
_MAX_PARTIAL_LIMIT = 1 << 16
_MAX_FRAME_LIMIT = 1 << 32
def decompress_bounded(data: bytes, max_frame: int) -> bytes:
    """One complete zstd frame (no trailing bytes) decompressed to at most max_frame
    bytes. FrameTooLarge when it would exceed max_frame, DecompressError when invalid.
    TypeError / ValueError on a bad argument (max_frame must be an int in 0..2**32).
    The bound (qim/_core/zstd_bound.py, shared with the compiled codec) never allocates
    more than about max_frame, whatever the frame claims."""
    data = as_bytes(data, "data")
    check_int(max_frame, 0, _MAX_FRAME_LIMIT, ValueError, "max_frame")
    return zstd_decompress(data, max_frame)


def encode_header(flags: int, opcode: int, chunk_index: int, request_id: int, body_len: int) -> bytes:
    """20 header bytes; ValueError out of range, BadFlags, ChunkTooLarge."""
    check_int(flags, 0, 0xFF, ValueError, "flags")
    check_int(opcode, 0, _U16, ValueError, "opcode")
    check_int(chunk_index, 0, _U16, ValueError, "chunk_index")
    check_int(request_id, 0, _U32, ValueError, "request_id")
    if not isinstance(body_len, int):
        raise TypeError("body_len must be int")
    if body_len < 0:
        raise ValueError("body_len must not be negative")
    if flags & ~FLAGS_KNOWN:
        raise BadFlags(f"unknown or reserved flag bits 0x{flags:02x}")
    if body_len > STREAM_WRITE_CHUNK_BYTES:
        raise ChunkTooLarge(f"chunk body_len {body_len} > {STREAM_WRITE_CHUNK_BYTES}")
    pre = _PRE.pack(FRAME_MAGIC, FRAME_VERSION, flags, opcode, chunk_index, request_id, body_len)
    return pre + _CRC.pack(zlib.crc32(pre))


def decode_header(buf: bytes, offset: int = 0) -> tuple[int, int, int, int, int]:
    """(flags, opcode, chunk_index, request_id, body_len) of the 20 bytes at offset."""
    raw = as_bytes(buf, "buf")
    if not isinstance(offset, int):
        raise TypeError("offset must be int")
    if offset < 0:
        raise ValueError("offset must not be negative")
    if len(raw) - offset < FRAME_HEADER_LEN:
        raise TruncatedFrame("fewer than 20 header bytes")
    return _check_header(raw, offset)


def _check_header(raw: bytes | memoryview, off: int) -> tuple[int, int, int, int, int]:
    magic, version, flags, opcode, index, rid, blen = _PRE.unpack_from(raw, off)
    if magic != FRAME_MAGIC:
        raise BadMagic(f"bad frame magic 0x{magic:04x}")
    (crc,) = _CRC.unpack_from(raw, off + 16)
    if zlib.crc32(raw[off:off + 16]) != crc:
        raise BadCrc("frame header CRC mismatch")
    if version != FRAME_VERSION:
        raise BadVersion(f"unknown frame version {version}")
    if flags & ~FLAGS_KNOWN:
        raise BadFlags(f"unknown or reserved flag bits 0x{flags:02x}")
    if blen > STREAM_WRITE_CHUNK_BYTES:
        raise ChunkTooLarge(f"chunk body_len {blen} > {STREAM_WRITE_CHUNK_BYTES}")
    return flags, opcode, index, rid, blen


def encode_frame(opcode: int, request_id: int, body: bytes, compress: bool = False,
                 chunk_bytes: int = 65536) -> list[bytes]:
    """Wire chunks (header + chunk body each) of one frame."""
    check_int(opcode, 0, _U16, ValueError, "opcode")
    check_int(request_id, 0, _U32, ValueError, "request_id")
    check_int(chunk_bytes, 1, STREAM_WRITE_CHUNK_BYTES, ValueError, "chunk_bytes")
    raw = as_bytes(body, "body")
    if len(raw) > MAX_FRAME_BODY:
        raise FrameTooLarge(f"frame body {len(raw)} > {MAX_FRAME_BODY}")
    flags = 0
    if compress:
        raw = zstd_compressor().compress(raw)
        flags = FLAG_COMPRESSED
        if len(raw) > MAX_FRAME_BODY:
            raise FrameTooLarge(f"compressed frame body {len(raw)} > {MAX_FRAME_BODY}")
    n = len(raw)
    count = max(1, -(-n // chunk_bytes))
    if count > _MAX_CHUNKS:
        raise ValueError(f"{count} chunks exceed the u16 chunk_index")
    out = []
    for i in range(count):
        part = raw[i * chunk_bytes:(i + 1) * chunk_bytes]
        f = flags | (FLAG_MORE if i + 1 < count else 0)
        out.append(encode_header(f, opcode, i, request_id, len(part)) + part)
    return out


class _Partial:
    __slots__ = ("next_index", "compressed", "data")

    def __init__(self, compressed: bool, data: bytes | memoryview) -> None:
        self.next_index = 1
        self.compressed = compressed
        self.data = bytearray(data)


class FrameDecoder:
    """Incremental stream decoder; any FrameError poisons it (every later feed raises)."""

    def __init__(self, max_frame: int = MAX_FRAME_BODY, max_partial_frames: int = 16) -> None:
        self._max_frame = check_int(max_frame, 0, _MAX_FRAME_LIMIT, ValueError, "max_frame")
        self._max_partial = check_int(
            max_partial_frames, 1, _MAX_PARTIAL_LIMIT, ValueError, "max_partial_frames")
        self._buf = bytearray()
        self._pos = 0
        self._partials: dict[tuple[int, int], _Partial] = {}
        self._partial_bytes = 0
        self._poison: tuple[type[FrameError], str] | None = None

    def feed(self, data: bytes) -> list[tuple[int, int, bytes]]:
        """Append `data`; return every frame it completes as (opcode, request_id, body)."""
        if self._poison is not None:
            raise self._poison[0](self._poison[1])
        raw = as_bytes(data, "data")
        try:
            return self._feed(raw)
        except FrameError as e:
            self._poison = (type(e), str(e))
            raise

    def _feed(self, data: bytes) -> list[tuple[int, int, bytes]]:
        out: list[tuple[int, int, bytes]] = []
        direct = self._pos == len(self._buf)
        if direct:  # nothing pending: parse the caller's bytes without copying them
            src: bytes | bytearray = data
            pos = 0
        else:
            self._buf += data
            src = self._buf
            pos = self._pos
        n = len(src)
        with memoryview(src) as mv:
            while n - pos >= FRAME_HEADER_LEN:
                flags, opcode, index, rid, blen = _check_header(mv, pos)
                end = pos + FRAME_HEADER_LEN + blen
                if end > n:
                    break
                self._chunk(flags, opcode, index, rid, mv[pos + FRAME_HEADER_LEN:end], out)
                pos = end
        if direct:  # _buf is empty here; keep only an unparsed tail
            if pos < n:
                self._buf = bytearray(data[pos:])
        elif pos == n:
            self._buf = bytearray()
            self._pos = 0
        elif pos >= STREAM_WRITE_CHUNK_BYTES and 2 * pos >= n:
            del self._buf[:pos]
            self._pos = 0
        else:
            self._pos = pos
        return out

    def _chunk(self, flags: int, opcode: int, index: int, rid: int, body: memoryview,
               out: list[tuple[int, int, bytes]]) -> None:
        key = (opcode, rid)
        compressed = bool(flags & FLAG_COMPRESSED)
        more = bool(flags & FLAG_MORE)
        part = self._partials.get(key)
        if part is None:
            if index != 0:
                raise ChunkOrder(f"frame {key} starts at chunk {index}")
            if len(body) > self._max_frame:
                raise FrameTooLarge(f"frame body exceeds {self._max_frame}")
            if more:
                if len(self._partials) >= self._max_partial:
                    raise ChunkOrder(f"more than {self._max_partial} open frames")
                self._partials[key] = _Partial(compressed, body)
                self._partial_bytes += len(body)
            else:
                out.append((opcode, rid, self._finish(compressed, bytes(body))))
            return
        if index != part.next_index:
            raise ChunkOrder(f"frame {key}: chunk {index}, expected {part.next_index}")
        if compressed != part.compressed:
            raise ChunkOrder(f"frame {key}: COMPRESSED differs between chunks")
        if len(part.data) + len(body) > self._max_frame:
            raise FrameTooLarge(f"reassembled body exceeds {self._max_frame}")
        part.data += body
        part.next_index += 1
        self._partial_bytes += len(body)
        if not more:
            del self._partials[key]
            self._partial_bytes -= len(part.data)
            out.append((opcode, rid, self._finish(compressed, bytes(part.data))))

    def _finish(self, compressed: bool, body: bytes) -> bytes:
        if compressed:
            return decompress_bounded(body, self._max_frame)
        return body

    @property
    def buffered(self) -> int:
        """Bytes held: partial header/chunk plus open reassemblies."""
        return len(self._buf) - self._pos + self._partial_bytes

    def at_boundary(self) -> bool:
        """True when no partial header, chunk body or reassembly is pending."""
        return self._pos == len(self._buf) and not self._partials
