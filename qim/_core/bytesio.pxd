# cython: language_level=3
"""Inline big-endian loads/stores and argument coercion for the compiled core.

Every hand-made binary layout of QIM is unsigned big-endian fixed width (docs/design.md §3);
these helpers are the only place the compiled modules assemble or read such integers.
Callers guarantee the pointer covers the bytes touched (asyncpg hton.pxd style).
"""

from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from cpython.bytes cimport PyBytes_AS_STRING


cdef inline uint16_t load_be16(const unsigned char* p) noexcept nogil:
    return (<uint16_t>p[0] << 8) | <uint16_t>p[1]


cdef inline uint32_t load_be32(const unsigned char* p) noexcept nogil:
    return ((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16)
            | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline uint64_t load_be64(const unsigned char* p) noexcept nogil:
    return (<uint64_t>load_be32(p) << 32) | <uint64_t>load_be32(p + 4)


cdef inline void store_be16(unsigned char* p, uint16_t v) noexcept nogil:
    p[0] = <unsigned char>(v >> 8)
    p[1] = <unsigned char>v


cdef inline void store_be32(unsigned char* p, uint32_t v) noexcept nogil:
    p[0] = <unsigned char>(v >> 24)
    p[1] = <unsigned char>(v >> 16)
    p[2] = <unsigned char>(v >> 8)
    p[3] = <unsigned char>v


cdef inline void store_be64(unsigned char* p, uint64_t v) noexcept nogil:
    store_be32(p, <uint32_t>(v >> 32))
    store_be32(p + 4, <uint32_t>v)


cdef inline bint all_zero(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if p[i]:
            return False
    return True


cdef inline bytes as_bytes(object obj, str what):
    """`bytes` for bytes, bytearray or memoryview; TypeError otherwise (as _pure._util)."""
    if isinstance(obj, bytes):
        return <bytes>obj
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    raise TypeError(f"{what} must be bytes-like, not {type(obj).__name__}")


cdef inline const unsigned char* bptr(bytes b) noexcept:
    return <const unsigned char*>PyBytes_AS_STRING(b)


cdef inline uint64_t check_u64(object value, uint64_t lo, uint64_t hi, object exc,
                               str what) except? 0xFFFFFFFFFFFFFFFF:
    """`value` as a C u64 when it is an int in lo..hi; TypeError for a non-int."""
    cdef uint64_t v
    if not isinstance(value, int):
        raise TypeError(f"{what} must be int, not {type(value).__name__}")
    if value < 0 or value > 0xFFFFFFFFFFFFFFFF:
        raise exc(f"{what} out of range {lo}..{hi}")
    v = <uint64_t>value
    if v < lo or v > hi:
        raise exc(f"{what} out of range {lo}..{hi}")
    return v
