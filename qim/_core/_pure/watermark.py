"""Packed 64-lane watermark, pure-Python twin (docs/design.md §3 "Packed watermark").

Lane record, 19 bytes big-endian: flags u8 (bit 0 materialized, bit 1 recomputed,
others 0) ‖ W u64 ‖ W_floor u64 ‖ reserved u16 (0). A 19-byte blob is one record that
holds for all 64 lanes; a 1216-byte blob is 64 records in lane order. W and W_floor
are 48-bit log offsets; a materialized lane has W >= W_floor. Everything else fails
closed with WatermarkError. A blob whose 64 records are equal is always written in the
19-byte form.
"""

from __future__ import annotations

import struct

from qim.consts import (
    LANE_COUNT,
    MAILBOX_OFFSET_MASK,
    WM_FLAG_MATERIALIZED,
    WM_FLAG_RECOMPUTED,
    WM_FULL_LEN,
    WM_RECORD_LEN,
)
from qim.errors import WatermarkError

from ._util import as_bytes, check_int

_REC = struct.Struct(">BQQH")
_FLAGS_KNOWN = WM_FLAG_MATERIALIZED | WM_FLAG_RECOMPUTED
assert _REC.size == WM_RECORD_LEN and WM_FULL_LEN == WM_RECORD_LEN * LANE_COUNT

Record = tuple[int, int, int]


def _check_record(flags: int, w: int, floor: int) -> None:
    if flags & ~_FLAGS_KNOWN:
        raise WatermarkError(f"unknown watermark flag bits 0x{flags:02x}")
    if w > MAILBOX_OFFSET_MASK or floor > MAILBOX_OFFSET_MASK:
        raise WatermarkError("W / W_floor must be 48-bit log offsets")
    if flags & WM_FLAG_MATERIALIZED and w < floor:
        raise WatermarkError(f"materialized lane has W {w} below W_floor {floor}")


def _parse(blob: bytes, off: int) -> Record:
    flags, w, floor, reserved = _REC.unpack_from(blob, off)
    if reserved:
        raise WatermarkError("non-zero reserved field in watermark record")
    _check_record(flags, w, floor)
    return (flags, w, floor)


def empty() -> bytes:
    """The 19-byte blob of nothing materialized (flags 0, W 0, W_floor 0)."""
    return bytes(WM_RECORD_LEN)


def decode(blob: bytes) -> list[Record]:
    """64 (flags, W, W_floor) tuples in lane order; WatermarkError on any bad field."""
    raw = as_bytes(blob, "blob")
    if len(raw) == WM_RECORD_LEN:
        return [_parse(raw, 0)] * LANE_COUNT
    if len(raw) == WM_FULL_LEN:
        return [_parse(raw, i * WM_RECORD_LEN) for i in range(LANE_COUNT)]
    raise WatermarkError(f"watermark blob length {len(raw)} is neither 19 nor 1216")


def _normalize(records: object) -> list[Record]:
    try:
        items = list(records)  # type: ignore[call-overload]
    except TypeError:
        raise WatermarkError("records must be a sequence of 64 records") from None
    if len(items) != LANE_COUNT:
        raise WatermarkError(f"watermark needs {LANE_COUNT} records, got {len(items)}")
    out = []
    for rec in items:
        try:
            fields = tuple(rec)
        except TypeError:
            raise WatermarkError("a watermark record is (flags, W, W_floor)") from None
        if len(fields) != 3:
            raise WatermarkError("a watermark record is (flags, W, W_floor)")
        flags = check_int(fields[0], 0, 0xFF, WatermarkError, "flags")
        w = check_int(fields[1], 0, MAILBOX_OFFSET_MASK, WatermarkError, "W")
        floor = check_int(fields[2], 0, MAILBOX_OFFSET_MASK, WatermarkError, "W_floor")
        _check_record(flags, w, floor)
        out.append((flags, w, floor))
    return out


def _pack(records: list[Record]) -> bytes:
    first = records[0]
    if all(r == first for r in records):
        return _REC.pack(*first, 0)
    return b"".join(_REC.pack(*r, 0) for r in records)


def encode(records: list[Record]) -> bytes:
    """Blob of 64 lane records, the 19-byte form when all 64 are equal."""
    return _pack(_normalize(records))


def advance_all(blob: bytes, log_offset: int) -> bytes:
    """Every lane: set bit 0 and W = max(W, log_offset); the canonical blob."""
    check_int(log_offset, 0, MAILBOX_OFFSET_MASK, WatermarkError, "log_offset")
    out = []
    for flags, w, floor in decode(blob):
        flags |= WM_FLAG_MATERIALIZED
        w = max(w, log_offset)
        _check_record(flags, w, floor)
        out.append((flags, w, floor))
    return _pack(out)


def start_offset(blob: bytes) -> int:
    """min over lanes of (W + 1 if bit 0 else 0): an empty watermark starts at 0."""
    return min(w + 1 if flags & WM_FLAG_MATERIALIZED else 0 for flags, w, _ in decode(blob))


def visible_offset(blob: bytes, lane: int) -> int:
    """W of `lane`, or -1 when nothing was materialized there; ValueError on a bad lane."""
    check_int(lane, 0, LANE_COUNT - 1, ValueError, "lane")
    flags, w, _ = decode(blob)[lane]
    return w if flags & WM_FLAG_MATERIALIZED else -1
