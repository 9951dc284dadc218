"""Argument coercion shared by the pure twins (mirrors qim/_core/bytesio.pxd)."""

from __future__ import annotations


def as_bytes(obj: object, what: str) -> bytes:
    """`bytes` for a bytes-like argument (bytes, bytearray, memoryview); TypeError else."""
    if isinstance(obj, bytes):
        return obj
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    raise TypeError(f"{what} must be bytes-like, not {type(obj).__name__}")


def check_int(value: object, lo: int, hi: int, exc: type[Exception], what: str) -> int:
    """`value` when it is an int in lo..hi; TypeError for a non-int, `exc` out of range."""
    if not isinstance(value, int):
        raise TypeError(f"{what} must be int, not {type(value).__name__}")
    if value < lo or value > hi:
        raise exc(f"{what} out of range {lo}..{hi}")
    return value
