"""mailbox_seq = shard_epoch (16) ‖ log_offset (48), pure-Python twin (docs/design.md §3).

shard_epoch is 1..2**15-1 so bit 63 of a mailbox_seq is always clear; log_offset is
0..2**48-1. Raw 0 is the "nothing applied yet" cursor, never a composed value, so
compose(1, 0) == 2**48 is a real position. Bytes form: 8 bytes big-endian (the member
of a mailbox ZSET; a double score cannot hold the full value).
"""

from __future__ import annotations

from qim.consts import MAILBOX_EPOCH_MAX, MAILBOX_OFFSET_BITS, MAILBOX_OFFSET_MASK
from qim.errors import SeqError

from ._util import as_bytes, check_int

_SEQ_MAX = (1 << 63) - 1


def compose(shard_epoch: int, log_offset: int) -> int:
    """The u64 mailbox_seq. SeqError when either part is out of range."""
    check_int(shard_epoch, 1, MAILBOX_EPOCH_MAX, SeqError, "shard_epoch")
    check_int(log_offset, 0, MAILBOX_OFFSET_MASK, SeqError, "log_offset")
    return (shard_epoch << MAILBOX_OFFSET_BITS) | log_offset


def split(mailbox_seq: int) -> tuple[int, int]:
    """(shard_epoch, log_offset); SeqError for a negative, >= 2**63 or epoch-0 value."""
    check_int(mailbox_seq, 0, _SEQ_MAX, SeqError, "mailbox_seq")
    epoch = mailbox_seq >> MAILBOX_OFFSET_BITS
    if epoch == 0:
        raise SeqError("mailbox_seq has shard_epoch 0 (raw 0 means nothing applied)")
    return epoch, mailbox_seq & MAILBOX_OFFSET_MASK


def is_valid(mailbox_seq: int) -> bool:
    """True when split() would succeed (False, never an exception, for a non-int)."""
    return (
        isinstance(mailbox_seq, int)
        and 0 <= mailbox_seq <= _SEQ_MAX
        and (mailbox_seq >> MAILBOX_OFFSET_BITS) != 0
    )


def to_bytes(mailbox_seq: int) -> bytes:
    """8 big-endian bytes of a valid mailbox_seq (SeqError otherwise)."""
    split(mailbox_seq)
    return mailbox_seq.to_bytes(8, "big")


def from_bytes(data: bytes) -> int:
    """Inverse of to_bytes; SeqError on a length other than 8 or an invalid value."""
    raw = as_bytes(data, "data")
    if len(raw) != 8:
        raise SeqError(f"mailbox_seq bytes must be 8 long, got {len(raw)}")
    value = int.from_bytes(raw, "big")
    split(value)
    return value
