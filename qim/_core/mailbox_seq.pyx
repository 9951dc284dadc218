# cython: language_level=3
"""mailbox_seq = shard_epoch (16) ‖ log_offset (48), compiled (docs/design.md §3).

shard_epoch is 1..2**15-1 so bit 63 stays clear (CQL bigint); log_offset is
0..2**48-1. Raw 0 is the "nothing applied yet" cursor and not a composed value, so
compose(1, 0) == 2**48 is a real position. Bytes form: 8 bytes big-endian (the ZSET
member; a double score cannot hold the full value). Pure twin: _pure/mailbox_seq.py.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport uint64_t

from qim._core.bytesio cimport as_bytes, bptr, check_u64, load_be64, store_be64
from qim._core.limits cimport (
    QIM_EPOCH_MAX, QIM_OFFSET_BITS, QIM_OFFSET_MASK, QIM_U63_MAX, check_consts,
)

from qim.errors import SeqError

check_consts()  # import-time guard against a stale build


cdef uint64_t c_compose(object shard_epoch, object log_offset) except? 0:
    cdef uint64_t e = check_u64(shard_epoch, 1, QIM_EPOCH_MAX, SeqError, "shard_epoch")
    cdef uint64_t o = check_u64(log_offset, 0, QIM_OFFSET_MASK, SeqError, "log_offset")
    return (e << QIM_OFFSET_BITS) | o


cdef uint64_t c_check_seq(object mailbox_seq) except? 0:
    cdef uint64_t v = check_u64(mailbox_seq, 0, QIM_U63_MAX, SeqError, "mailbox_seq")
    if (v >> QIM_OFFSET_BITS) == 0:
        raise SeqError("mailbox_seq has shard_epoch 0 (raw 0 means nothing applied)")
    return v


def compose(shard_epoch, log_offset):
    """The u64 mailbox_seq. SeqError when either part is out of range."""
    return c_compose(shard_epoch, log_offset)


def split(mailbox_seq):
    """(shard_epoch, log_offset); SeqError for a negative, >= 2**63 or epoch-0 value."""
    cdef uint64_t v = c_check_seq(mailbox_seq)
    return (v >> QIM_OFFSET_BITS, v & QIM_OFFSET_MASK)


def is_valid(mailbox_seq):
    """True when split() would succeed (False, never an exception, for a non-int)."""
    if not isinstance(mailbox_seq, int):
        return False
    if mailbox_seq < 0 or mailbox_seq > QIM_U63_MAX:
        return False
    return ((<uint64_t>mailbox_seq) >> QIM_OFFSET_BITS) != 0


def to_bytes(mailbox_seq):
    """8 big-endian bytes of a valid mailbox_seq (SeqError otherwise)."""
    cdef unsigned char buf[8]
    store_be64(buf, c_check_seq(mailbox_seq))
    return PyBytes_FromStringAndSize(<char*>buf, 8)


def from_bytes(data):
    """Inverse of to_bytes; SeqError on a length other than 8 or an invalid value."""
    cdef bytes raw = as_bytes(data, "data")
    if len(raw) != 8:
        raise SeqError(f"mailbox_seq bytes must be 8 long, got {len(raw)}")
    return c_check_seq(load_be64(bptr(raw)))
