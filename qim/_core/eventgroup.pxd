# cython: language_level=3
"""Typed interface of qim._core.eventgroup (docs/design.md §5): event and group codec."""

cdef enum:
    EVENT_VERSION = 1
    EV_FLAG_CMID = 0x01
    EV_FLAG_BODY = 0x02
    EV_FIXED_LEN = 80   # head 7 + ids 48 + seq/sender/created 24 + custom_type_len 1

cdef bytes c_pack_event(object event)
cdef object c_unpack_event(const unsigned char* p, Py_ssize_t n)
