# cython: language_level=3
"""Typed interface of qim._core.ids (docs/design.md §3 table): hash-input builders."""

from libc.stdint cimport uint64_t

cdef int store_tenant(unsigned char* p, object tenant) except -1
cdef bytes id16(object value, str what)
cdef bytes digest(const unsigned char* buf, Py_ssize_t n)
cdef Py_ssize_t put_domain(unsigned char* p, bytes domain) noexcept
cdef uint64_t c_virtual_bucket(object tenant, object user_id) except? 0xFFFFFFFFFFFFFFFF
cdef uint64_t c_lane_id(object tenant, object user_id) except? 0xFFFFFFFFFFFFFFFF
