# cython: language_level=3
"""Typed interface of qim._core.frame (docs/design.md §4): header codec and FrameDecoder."""

from libc.stdint cimport uint32_t


ctypedef struct Header:
    int flags
    int opcode
    int index
    uint32_t request_id
    uint32_t body_len


cdef int parse_header(const unsigned char* p, Header* h) except -1
cdef void write_header(unsigned char* p, int flags, int opcode, int index,
                       uint32_t request_id, uint32_t body_len) noexcept nogil


cdef class _Partial:
    cdef int next_index
    cdef bint compressed
    cdef bytearray data


cdef class FrameDecoder:
    cdef bytearray _buf            # unparsed stream bytes from _pos on
    cdef Py_ssize_t _pos           # read offset into _buf (compacted occasionally)
    cdef Py_ssize_t _max_frame
    cdef Py_ssize_t _max_partial
    cdef dict _partials            # (opcode << 32 | request_id) -> _Partial
    cdef Py_ssize_t _partial_bytes
    cdef object _poison_cls        # FrameError subclass once poisoned, else None
    cdef str _poison_msg
    cdef int _op_val               # last opcode seen and its int object (reused: frames
    cdef object _op_obj            # of one stream mostly share a few opcodes)

    cdef list _feed(self, bytes data)
    cdef int _chunk(self, const Header* h, const unsigned char* body, list out) except -1
    cdef object _finish(self, bint compressed, object body)
    cdef inline object _opcode(self, int opcode)
