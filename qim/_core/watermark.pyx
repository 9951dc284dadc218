# cython: language_level=3
"""Packed 64-lane watermark, compiled (docs/design.md §3 "Packed watermark").

Lane record, 19 bytes big-endian: flags u8 (bit 0 materialized, bit 1 recomputed,
others 0) ‖ W u64 ‖ W_floor u64 ‖ reserved u16 (0). A 19-byte blob is one record that
holds for all 64 lanes; a 1216-byte blob is 64 records in lane order. W and W_floor
are 48-bit log offsets; a materialized lane has W >= W_floor. Everything else fails
closed with WatermarkError. A blob whose 64 records are equal is always written in the
19-byte form. Blobs are parsed into a C array of 64 lanes; no per-lane Python objects
are built except by decode(). Pure twin: _pure/watermark.py.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport uint8_t, uint64_t

from qim._core.bytesio cimport (
    as_bytes, bptr, check_u64, load_be16, load_be64, store_be16, store_be64,
)
from qim._core.limits cimport (
    QIM_LANE_COUNT, QIM_OFFSET_MASK, QIM_WM_FULL_LEN, QIM_WM_RECORD_LEN, check_consts,
)

from qim.consts import WM_FLAG_MATERIALIZED, WM_FLAG_RECOMPUTED
from qim.errors import WatermarkError

check_consts()  # import-time guard against a stale build
assert WM_FLAG_MATERIALIZED == 1 and WM_FLAG_RECOMPUTED == 2

cdef enum:
    MATERIALIZED = 0x01
    FLAGS_KNOWN = 0x03


cdef int check_lane(uint64_t flags, uint64_t w, uint64_t floor) except -1:
    if flags & ~(<uint64_t>FLAGS_KNOWN):
        raise WatermarkError(f"unknown watermark flag bits 0x{flags:02x}")
    if w > QIM_OFFSET_MASK or floor > QIM_OFFSET_MASK:
        raise WatermarkError("W / W_floor must be 48-bit log offsets")
    if (flags & MATERIALIZED) and w < floor:
        raise WatermarkError(f"materialized lane has W {w} below W_floor {floor}")
    return 0


cdef inline int parse_record(const unsigned char* p, WmLane* lane) except -1:
    if load_be16(p + 17) != 0:
        raise WatermarkError("non-zero reserved field in watermark record")
    lane.flags = p[0]
    lane.w = load_be64(p + 1)
    lane.floor = load_be64(p + 9)
    return check_lane(lane.flags, lane.w, lane.floor)


cdef int parse_blob(object blob, WmLane* lanes) except -1:
    """Fill lanes[0..63] from a 19- or 1216-byte blob (its length is returned)."""
    cdef bytes raw = as_bytes(blob, "blob")
    cdef const unsigned char* p = bptr(raw)
    cdef Py_ssize_t n = len(raw)
    cdef int i
    if n == QIM_WM_RECORD_LEN:
        parse_record(p, &lanes[0])
        for i in range(1, QIM_LANE_COUNT):
            lanes[i] = lanes[0]
    elif n == QIM_WM_FULL_LEN:
        for i in range(QIM_LANE_COUNT):
            parse_record(p + i * QIM_WM_RECORD_LEN, &lanes[i])
    else:
        raise WatermarkError(f"watermark blob length {n} is neither 19 nor 1216")
    return <int>n


cdef inline void store_record(unsigned char* p, const WmLane* lane) noexcept:
    p[0] = lane.flags
    store_be64(p + 1, lane.w)
    store_be64(p + 9, lane.floor)
    store_be16(p + 17, 0)


cdef bytes pack_lanes(const WmLane* lanes):
    """The canonical blob: 19 bytes when all 64 lanes are equal, else 1216."""
    cdef int i
    cdef bint same = True
    cdef bytes out
    for i in range(1, QIM_LANE_COUNT):
        if (lanes[i].flags != lanes[0].flags or lanes[i].w != lanes[0].w
                or lanes[i].floor != lanes[0].floor):
            same = False
            break
    if same:
        out = PyBytes_FromStringAndSize(NULL, QIM_WM_RECORD_LEN)
        store_record(<unsigned char*>PyBytes_AS_STRING(out), &lanes[0])
        return out
    out = PyBytes_FromStringAndSize(NULL, QIM_WM_FULL_LEN)
    cdef unsigned char* q = <unsigned char*>PyBytes_AS_STRING(out)
    for i in range(QIM_LANE_COUNT):
        store_record(q + i * QIM_WM_RECORD_LEN, &lanes[i])
    return out


def empty():
    """The 19-byte blob of nothing materialized (flags 0, W 0, W_floor 0)."""
    return bytes(QIM_WM_RECORD_LEN)


def decode(blob):
    """64 (flags, W, W_floor) tuples in lane order; WatermarkError on any bad field."""
    cdef WmLane lanes[64]
    cdef int i
    cdef bytes raw = as_bytes(blob, "blob")
    if len(raw) == QIM_WM_RECORD_LEN:  # uniform form: one record, no 64-lane expansion
        parse_record(bptr(raw), &lanes[0])
        return [(lanes[0].flags, lanes[0].w, lanes[0].floor)] * QIM_LANE_COUNT
    parse_blob(raw, lanes)
    return [(lanes[i].flags, lanes[i].w, lanes[i].floor) for i in range(QIM_LANE_COUNT)]


def encode(records):
    """Blob of 64 lane records, the 19-byte form when all 64 are equal."""
    cdef WmLane lanes[64]
    cdef int i = 0
    try:
        items = list(records)
    except TypeError:
        raise WatermarkError("records must be a sequence of 64 records") from None
    if len(items) != QIM_LANE_COUNT:
        raise WatermarkError(f"watermark needs 64 records, got {len(items)}")
    for rec in items:
        try:
            fields = tuple(rec)
        except TypeError:
            raise WatermarkError("a watermark record is (flags, W, W_floor)") from None
        if len(fields) != 3:
            raise WatermarkError("a watermark record is (flags, W, W_floor)")
        lanes[i].flags = <uint8_t>check_u64(fields[0], 0, 0xFF, WatermarkError, "flags")
        lanes[i].w = check_u64(fields[1], 0, QIM_OFFSET_MASK, WatermarkError, "W")
        lanes[i].floor = check_u64(fields[2], 0, QIM_OFFSET_MASK, WatermarkError, "W_floor")
        check_lane(lanes[i].flags, lanes[i].w, lanes[i].floor)
        i += 1
    return pack_lanes(lanes)


def advance_all(blob, log_offset):
    """Every lane: set bit 0 and W = max(W, log_offset); the canonical blob."""
    cdef WmLane lanes[64]
    cdef int i
    cdef uint64_t off = check_u64(log_offset, 0, QIM_OFFSET_MASK, WatermarkError, "log_offset")
    parse_blob(blob, lanes)
    for i in range(QIM_LANE_COUNT):
        lanes[i].flags |= MATERIALIZED
        if lanes[i].w < off:
            lanes[i].w = off
        check_lane(lanes[i].flags, lanes[i].w, lanes[i].floor)
    return pack_lanes(lanes)


def start_offset(blob):
    """min over lanes of (W + 1 if bit 0 else 0): an empty watermark starts at 0."""
    cdef WmLane lanes[64]
    cdef int i
    cdef uint64_t best = QIM_OFFSET_MASK + 1, cur
    parse_blob(blob, lanes)
    for i in range(QIM_LANE_COUNT):
        cur = lanes[i].w + 1 if lanes[i].flags & MATERIALIZED else 0
        if cur < best:
            best = cur
    return best


def visible_offset(blob, lane):
    """W of `lane`, or -1 when nothing was materialized there; ValueError on a bad lane."""
    cdef WmLane lanes[64]
    cdef uint64_t i = check_u64(lane, 0, QIM_LANE_COUNT - 1, ValueError, "lane")
    parse_blob(blob, lanes)
    if lanes[i].flags & MATERIALIZED:
        return lanes[i].w
    return -1
