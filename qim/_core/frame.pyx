# cython: language_level=3
"""Frame codec, compiled (docs/design.md §4 "Frame header").

Header, 20 bytes big-endian:
  0 magic u16 = 0x5149 | 2 version u8 = 1 | 3 flags u8 (bit0 COMPRESSED, bit1 MORE,
  bit2 NEED_ACK reserved = 0) | 4 opcode u16 | 6 chunk_index u16 | 8 request_id u32
  | 12 body_len u32 (<= 64 KiB) | 16 header_crc u32 = CRC-32 (zlib) of bytes 0..15
Checked in this order: magic, CRC, version, flags, body_len. A frame is compressed whole
(zstd, flag on every chunk), then split into chunks of at most 64 KiB; chunks of
different frames may interleave and are reassembled by (opcode, request_id). Bodies are
bounded by max_frame (4 MiB) before and after decompression. Any FrameError poisons the
decoder (no resync). The header CRC is a slice-by-16 table CRC-32, checked against
zlib.crc32 at import; zstd is qim/_core/zstd_bound.py (shared with the pure twin).
FrameDecoder parses straight from the caller's bytes when nothing is pending and keeps
a bytearray plus a read offset otherwise, so many small frames cost no buffer copies;
a single-chunk uncompressed frame with nothing under reassembly (the usual case) is
emitted inline as one tuple and one bytes object, reusing the opcode's int object.
Pure twin: _pure/frame.py.
"""

from cpython.bytearray cimport (
    PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_GET_SIZE,
    PyByteArray_Resize,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize
from libc.stdint cimport uint32_t, uint64_t
from libc.string cimport memcpy

from qim._core.bytesio cimport (
    as_bytes, bptr, check_u64, load_be16, load_be32, store_be16, store_be32,
)
from qim._core.crc cimport crc_ready, qim_header_crc
from qim._core.limits cimport (
    QIM_CHUNK_MAX, QIM_FLAG_COMPRESSED, QIM_FLAG_MORE, QIM_FLAGS_KNOWN, QIM_FRAME_HEADER_LEN,
    QIM_FRAME_MAGIC, QIM_FRAME_VERSION, QIM_MAX_FRAME_BODY, check_consts,
)

from qim._core.zstd_bound import compressor as zstd_compressor
from qim._core.zstd_bound import decompress as zstd_decompress
from qim.errors import (
    BadCrc, BadFlags, BadMagic, BadVersion, ChunkOrder, ChunkTooLarge, FrameError, FrameTooLarge,
    TruncatedFrame,
)

check_consts()  # import-time guard against a stale build

crc_ready()  # header CRC tables built and checked against zlib.crc32


def decompress_bounded(data, max_frame):
    """One complete zstd frame decompressed to <= max_frame bytes (0..2**32): TypeError
    or ValueError on a bad argument, FrameTooLarge, DecompressError (as the pure twin)."""
    cdef bytes raw = as_bytes(data, "data")
    cdef Py_ssize_t limit = <Py_ssize_t>check_u64(max_frame, 0, 1 << 32, ValueError, "max_frame")
    return zstd_decompress(raw, limit)


cdef int parse_header(const unsigned char* p, Header* h) except -1:
    """Validate the 20 header bytes at p into h (magic, CRC, version, flags, body_len)."""
    if load_be16(p) != QIM_FRAME_MAGIC:
        raise BadMagic(f"bad frame magic 0x{load_be16(p):04x}")
    if qim_header_crc(p) != load_be32(p + 16):
        raise BadCrc("frame header CRC mismatch")
    if p[2] != QIM_FRAME_VERSION:
        raise BadVersion(f"unknown frame version {p[2]}")
    if p[3] & ~QIM_FLAGS_KNOWN:
        raise BadFlags(f"unknown or reserved flag bits 0x{p[3]:02x}")
    h.flags = p[3]
    h.opcode = load_be16(p + 4)
    h.index = load_be16(p + 6)
    h.request_id = load_be32(p + 8)
    h.body_len = load_be32(p + 12)
    if h.body_len > <uint32_t>QIM_CHUNK_MAX:
        raise ChunkTooLarge(f"chunk body_len {h.body_len} > {QIM_CHUNK_MAX}")
    return 0


cdef void write_header(unsigned char* p, int flags, int opcode, int index,
                       uint32_t request_id, uint32_t body_len) noexcept nogil:
    store_be16(p, QIM_FRAME_MAGIC)
    p[2] = QIM_FRAME_VERSION
    p[3] = <unsigned char>flags
    store_be16(p + 4, <unsigned short>opcode)
    store_be16(p + 6, <unsigned short>index)
    store_be32(p + 8, request_id)
    store_be32(p + 12, body_len)
    store_be32(p + 16, qim_header_crc(p))


def encode_header(flags, opcode, chunk_index, request_id, body_len):
    """20 header bytes; ValueError out of range, BadFlags, ChunkTooLarge."""
    cdef int f = <int>check_u64(flags, 0, 0xFF, ValueError, "flags")
    cdef int op = <int>check_u64(opcode, 0, 0xFFFF, ValueError, "opcode")
    cdef int idx = <int>check_u64(chunk_index, 0, 0xFFFF, ValueError, "chunk_index")
    cdef uint32_t rid = <uint32_t>check_u64(request_id, 0, 0xFFFFFFFF, ValueError, "request_id")
    if not isinstance(body_len, int):
        raise TypeError("body_len must be int")
    if body_len < 0:
        raise ValueError("body_len must not be negative")
    if f & ~QIM_FLAGS_KNOWN:
        raise BadFlags(f"unknown or reserved flag bits 0x{f:02x}")
    if body_len > QIM_CHUNK_MAX:
        raise ChunkTooLarge(f"chunk body_len {body_len} > {QIM_CHUNK_MAX}")
    cdef unsigned char buf[20]
    write_header(buf, f, op, idx, rid, <uint32_t>body_len)
    return PyBytes_FromStringAndSize(<char*>buf, QIM_FRAME_HEADER_LEN)


def decode_header(buf, offset=0):
    """(flags, opcode, chunk_index, request_id, body_len) of the 20 bytes at offset."""
    cdef bytes raw = as_bytes(buf, "buf")
    cdef Header h
    if not isinstance(offset, int):
        raise TypeError("offset must be int")
    if offset < 0:
        raise ValueError("offset must not be negative")
    if len(raw) - offset < QIM_FRAME_HEADER_LEN:
        raise TruncatedFrame("fewer than 20 header bytes")
    parse_header(bptr(raw) + <Py_ssize_t>offset, &h)
    return (h.flags, h.opcode, h.index, h.request_id, h.body_len)


def encode_frame(opcode, request_id, body, compress=False, chunk_bytes=65536):
    """Wire chunks (header + chunk body each) of one frame."""
    cdef int op = <int>check_u64(opcode, 0, 0xFFFF, ValueError, "opcode")
    cdef uint32_t rid = <uint32_t>check_u64(request_id, 0, 0xFFFFFFFF, ValueError, "request_id")
    cdef Py_ssize_t step = <Py_ssize_t>check_u64(chunk_bytes, 1, QIM_CHUNK_MAX, ValueError,
                                                  "chunk_bytes")
    cdef bytes raw = as_bytes(body, "body")
    cdef int flags = 0, i
    if len(raw) > QIM_MAX_FRAME_BODY:
        raise FrameTooLarge(f"frame body {len(raw)} > {QIM_MAX_FRAME_BODY}")
    if compress:
        raw = zstd_compressor().compress(raw)
        flags = QIM_FLAG_COMPRESSED
        if len(raw) > QIM_MAX_FRAME_BODY:
            raise FrameTooLarge(f"compressed frame body {len(raw)} > {QIM_MAX_FRAME_BODY}")
    cdef Py_ssize_t n = len(raw), count = (n + step - 1) // step, start, part
    if count == 0:
        count = 1
    if count > 0x10000:
        raise ValueError(f"{count} chunks exceed the u16 chunk_index")
    cdef const unsigned char* src = bptr(raw)
    cdef unsigned char* q
    out = []
    for i in range(count):
        start = i * step
        part = n - start if n - start < step else step
        chunk = PyBytes_FromStringAndSize(NULL, QIM_FRAME_HEADER_LEN + part)
        q = <unsigned char*>PyBytes_AS_STRING(chunk)
        write_header(q, flags | (QIM_FLAG_MORE if i + 1 < count else 0), op, i, rid,
                     <uint32_t>part)
        memcpy(q + QIM_FRAME_HEADER_LEN, src + start, part)
        out.append(chunk)
    return out


cdef class _Partial:
    """One frame under reassembly: next expected chunk_index, COMPRESSED, body so far."""


cdef class FrameDecoder:
    """Incremental stream decoder; any FrameError poisons it (every later feed raises)."""

    def __init__(self, max_frame=QIM_MAX_FRAME_BODY, max_partial_frames=16):
        self._max_frame = <Py_ssize_t>check_u64(max_frame, 0, 1 << 32, ValueError, "max_frame")
        self._max_partial = <Py_ssize_t>check_u64(max_partial_frames, 1, 1 << 16, ValueError,
                                                  "max_partial_frames")
        self._buf = bytearray()
        self._pos = 0
        self._partials = {}
        self._partial_bytes = 0
        self._poison_cls = None
        self._poison_msg = ""
        self._op_val = -1
        self._op_obj = None

    def feed(self, data):
        """Append `data`; return every frame it completes as (opcode, request_id, body)."""
        if self._poison_cls is not None:
            raise self._poison_cls(self._poison_msg)
        cdef bytes raw = as_bytes(data, "data")
        try:
            return self._feed(raw)
        except FrameError as e:
            self._poison_cls = type(e)
            self._poison_msg = str(e)
            raise

    cdef list _feed(self, bytes data):
        cdef list out = []
        cdef Header h
        cdef const unsigned char* p
        cdef Py_ssize_t n, pos, end, old
        cdef bint direct = self._pos == PyByteArray_GET_SIZE(self._buf)
        if direct:  # nothing pending: parse the caller's bytes without copying them
            p = bptr(data)
            n = len(data)
            pos = 0
        else:
            old = PyByteArray_GET_SIZE(self._buf)
            PyByteArray_Resize(self._buf, old + len(data))
            memcpy(PyByteArray_AS_STRING(self._buf) + old, bptr(data), len(data))
            p = <const unsigned char*>PyByteArray_AS_STRING(self._buf)
            n = PyByteArray_GET_SIZE(self._buf)
            pos = self._pos
        while n - pos >= QIM_FRAME_HEADER_LEN:
            parse_header(p + pos, &h)
            end = pos + QIM_FRAME_HEADER_LEN + h.body_len
            if end > n:
                break
            if (h.flags == 0 and h.index == 0 and not self._partials
                    and <Py_ssize_t>h.body_len <= self._max_frame):
                # the usual frame: one uncompressed chunk, nothing under reassembly
                out.append((self._opcode(h.opcode), h.request_id, PyBytes_FromStringAndSize(
                    <const char*>p + pos + QIM_FRAME_HEADER_LEN, h.body_len)))
            else:
                self._chunk(&h, p + pos + QIM_FRAME_HEADER_LEN, out)
            pos = end
        if direct:  # _buf is empty here; keep only an unparsed tail
            if pos < n:
                self._buf = PyByteArray_FromStringAndSize(<const char*>p + pos, n - pos)
        elif pos == n:
            PyByteArray_Resize(self._buf, 0)
            self._pos = 0
        elif pos >= QIM_CHUNK_MAX and 2 * pos >= n:
            del self._buf[:pos]
            self._pos = 0
        else:
            self._pos = pos
        return out

    cdef int _chunk(self, const Header* h, const unsigned char* body, list out) except -1:
        cdef uint64_t key = (<uint64_t>h.opcode << 32) | h.request_id
        cdef bint compressed = (h.flags & QIM_FLAG_COMPRESSED) != 0
        cdef bint more = (h.flags & QIM_FLAG_MORE) != 0
        cdef Py_ssize_t blen = h.body_len, have
        cdef _Partial part
        found = pykey = None  # the int key object is made once, and only when needed
        if self._partials:  # usual: nothing open
            pykey = key
            found = self._partials.get(pykey)
        if found is None:
            if h.index != 0:
                raise ChunkOrder(f"frame ({h.opcode}, {h.request_id}) starts at chunk {h.index}")
            if blen > self._max_frame:
                raise FrameTooLarge(f"frame body exceeds {self._max_frame}")
            if more:
                if len(self._partials) >= self._max_partial:
                    raise ChunkOrder(f"more than {self._max_partial} open frames")
                part = _Partial.__new__(_Partial)
                part.next_index = 1
                part.compressed = compressed
                part.data = PyByteArray_FromStringAndSize(<const char*>body, blen)
                self._partials[key if pykey is None else pykey] = part
                self._partial_bytes += blen
            else:
                out.append((self._opcode(h.opcode), h.request_id, self._finish(
                    compressed, PyBytes_FromStringAndSize(<const char*>body, blen))))
            return 0
        part = <_Partial>found
        if h.index != part.next_index:
            raise ChunkOrder(f"frame ({h.opcode}, {h.request_id}): chunk {h.index}, "
                             f"expected {part.next_index}")
        if compressed != part.compressed:
            raise ChunkOrder(f"frame ({h.opcode}, {h.request_id}): COMPRESSED differs")
        have = PyByteArray_GET_SIZE(part.data)
        if have + blen > self._max_frame:
            raise FrameTooLarge(f"reassembled body exceeds {self._max_frame}")
        PyByteArray_Resize(part.data, have + blen)
        memcpy(PyByteArray_AS_STRING(part.data) + have, body, blen)
        part.next_index += 1
        self._partial_bytes += blen
        if not more:
            del self._partials[pykey]
            self._partial_bytes -= have + blen
            out.append((self._opcode(h.opcode), h.request_id, self._finish(compressed, part.data)))
        return 0

    cdef object _finish(self, bint compressed, object body):
        """The frame body from `body` (bytes, or the bytearray of a reassembly)."""
        if compressed:
            return zstd_decompress(body, self._max_frame)
        if PyBytes_CheckExact(body):
            return body
        return PyBytes_FromStringAndSize(PyByteArray_AS_STRING(body), PyByteArray_GET_SIZE(body))

    cdef inline object _opcode(self, int opcode):
        if opcode != self._op_val:
            self._op_val = opcode
            self._op_obj = opcode
        return self._op_obj

    @property
    def buffered(self):
        """Bytes held: partial header/chunk plus open reassemblies."""
        return PyByteArray_GET_SIZE(self._buf) - self._pos + self._partial_bytes

    def at_boundary(self):
        """True when no partial header, chunk body or reassembly is pending."""
        return self._pos == PyByteArray_GET_SIZE(self._buf) and not self._partials
