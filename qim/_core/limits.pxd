# cython: language_level=3
"""C mirrors of the immutable contract constants (docs/design.md §3, §4, §11).

qim/consts.py is the source of truth; every compiled module asserts at import time
that these mirrors still equal it (a stale build fails loudly instead of disagreeing).
"""

from libc.stdint cimport uint64_t

cdef extern from *:
    """
    #define QIM_LANE_COUNT 64
    #define QIM_WM_RECORD_LEN 19
    #define QIM_WM_FULL_LEN (19 * 64)
    #define QIM_OFFSET_BITS 48
    #define QIM_OFFSET_MASK 0xFFFFFFFFFFFFULL
    #define QIM_EPOCH_MAX 0x7FFFULL
    #define QIM_U63_MAX 0x7FFFFFFFFFFFFFFFULL
    #define QIM_U64_MAX 0xFFFFFFFFFFFFFFFFULL
    #define QIM_FRAME_MAGIC 0x5149
    #define QIM_FRAME_VERSION 1
    #define QIM_FRAME_HEADER_LEN 20
    #define QIM_FLAG_COMPRESSED 0x01
    #define QIM_FLAG_MORE 0x02
    #define QIM_FLAGS_KNOWN 0x03
    #define QIM_CHUNK_MAX 65536
    #define QIM_MAX_FRAME_BODY (4 * 1024 * 1024)
    #define QIM_ID_LEN 16
    #define QIM_EG_MAX_EVENTS 8
    #define QIM_EG_MAX_BYTES 8192
    #define QIM_CUSTOM_TYPE_MAX 64
    """
    const int QIM_LANE_COUNT
    const int QIM_WM_RECORD_LEN
    const int QIM_WM_FULL_LEN
    const int QIM_OFFSET_BITS
    const uint64_t QIM_OFFSET_MASK
    const uint64_t QIM_EPOCH_MAX
    const uint64_t QIM_U63_MAX
    const uint64_t QIM_U64_MAX
    const int QIM_FRAME_MAGIC
    const int QIM_FRAME_VERSION
    const int QIM_FRAME_HEADER_LEN
    const int QIM_FLAG_COMPRESSED
    const int QIM_FLAG_MORE
    const int QIM_FLAGS_KNOWN
    const int QIM_CHUNK_MAX
    const Py_ssize_t QIM_MAX_FRAME_BODY
    const int QIM_ID_LEN
    const int QIM_EG_MAX_EVENTS
    const int QIM_EG_MAX_BYTES
    const int QIM_CUSTOM_TYPE_MAX


cdef inline void check_consts() except *:
    """Assert the C mirrors above equal qim/consts.py (called once at module import)."""
    from qim import consts as C
    mirrors = (
        (QIM_LANE_COUNT, C.LANE_COUNT), (QIM_WM_RECORD_LEN, C.WM_RECORD_LEN),
        (QIM_WM_FULL_LEN, C.WM_FULL_LEN), (QIM_OFFSET_BITS, C.MAILBOX_OFFSET_BITS),
        (QIM_OFFSET_MASK, C.MAILBOX_OFFSET_MASK), (QIM_EPOCH_MAX, C.MAILBOX_EPOCH_MAX),
        (QIM_U63_MAX, C.U63_MAX), (QIM_FRAME_MAGIC, C.FRAME_MAGIC),
        (QIM_FRAME_VERSION, C.FRAME_VERSION), (QIM_FRAME_HEADER_LEN, C.FRAME_HEADER_LEN),
        (QIM_FLAG_COMPRESSED, C.FLAG_COMPRESSED), (QIM_FLAG_MORE, C.FLAG_MORE),
        (QIM_FLAGS_KNOWN, C.FLAGS_KNOWN), (QIM_CHUNK_MAX, C.STREAM_WRITE_CHUNK_BYTES),
        (QIM_MAX_FRAME_BODY, C.MAX_FRAME_BODY), (QIM_ID_LEN, C.ID_LEN),
        (QIM_EG_MAX_EVENTS, C.EVENT_GROUP_MAX_EVENTS),
        (QIM_EG_MAX_BYTES, C.EVENT_GROUP_MAX_BYTES),
        (QIM_CUSTOM_TYPE_MAX, C.MAX_CUSTOM_TYPE_BYTES),
    )
    for compiled, source in mirrors:
        if compiled != source:
            raise ImportError(f"stale qim._core build: constant {compiled} != {source}")
    if C.MAILBOX_EPOCH_BITS + C.MAILBOX_OFFSET_BITS != 64 or C.VIRTUAL_BUCKET_COUNT != 65536:
        raise ImportError("stale qim._core build: sequence layout changed")
