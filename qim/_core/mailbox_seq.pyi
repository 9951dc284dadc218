"""mailbox_seq = shard_epoch (16) ‖ log_offset (48) (docs/design.md §3).
shard_epoch in 1..2**15-1 (bit 63 clear); log_offset in 0..2**48-1."""

def compose(shard_epoch: int, log_offset: int) -> int:
    """The u64 mailbox_seq. SeqError when either part is out of range."""

def split(mailbox_seq: int) -> tuple[int, int]:
    """(shard_epoch, log_offset). SeqError when the value is not a valid composed seq
    (negative, >= 2**63, or epoch 0). Raw 0 means "nothing applied" and is not splittable."""

def is_valid(mailbox_seq: int) -> bool:
    """True when split() would succeed."""

def to_bytes(mailbox_seq: int) -> bytes:
    """8 big-endian bytes of a valid mailbox_seq (SeqError otherwise)."""

def from_bytes(data: bytes) -> int:
    """Inverse of to_bytes; SeqError on a length other than 8 or an invalid value."""
