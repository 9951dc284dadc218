"""Packed 64-lane watermark (docs/design.md §3 "Packed watermark").

Lane record, 19 bytes: flags u8 (bit0 materialized, bit1 recomputed, others must be 0) ‖
W u64 ‖ W_floor u64 ‖ reserved u16 (must be 0). Blob of 19 bytes = one record for all
64 lanes; 1216 bytes = 64 records in lane order; anything else is WatermarkError.
W and W_floor are 48-bit log offsets (WatermarkError when >= 2**48)."""

def empty() -> bytes:
    """The 19-byte blob of nothing materialized (flags 0, W 0, W_floor 0)."""

def decode(blob: bytes) -> list[tuple[int, int, int]]:
    """64 (flags, W, W_floor) tuples in lane order. WatermarkError on a bad length,
    unknown flag bits, non-zero reserved field, W or W_floor >= 2**48, or W < W_floor
    on a materialized lane."""

def encode(records: list[tuple[int, int, int]]) -> bytes:
    """Blob of 64 lane records; the 19-byte form when all 64 are equal (always).
    WatermarkError on a count other than 64 or a value decode() would refuse."""

def advance_all(blob: bytes, log_offset: int) -> bytes:
    """Every lane: set bit0 and W = max(W, log_offset) (phase one advances all lanes of a
    shard together; a duplicate record still advances). Returns the canonical blob."""

def start_offset(blob: bytes) -> int:
    """Where consumption of the shard starts: min over lanes of (W + 1 if bit0 else 0).
    An empty watermark starts at 0, never at W + 1."""

def visible_offset(blob: bytes, lane: int) -> int:
    """The highest log offset of `lane` safe to expose (its W), or -1 when nothing was
    materialized in that lane. ValueError when lane is not in 0..63."""
