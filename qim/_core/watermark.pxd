# cython: language_level=3
"""Typed interface of qim._core.watermark (docs/design.md §3 "Packed watermark")."""

from libc.stdint cimport uint8_t, uint64_t


cdef struct WmLane:
    uint8_t flags
    uint64_t w
    uint64_t floor


cdef int check_lane(uint64_t flags, uint64_t w, uint64_t floor) except -1
cdef int parse_blob(object blob, WmLane* lanes) except -1
cdef bytes pack_lanes(const WmLane* lanes)
