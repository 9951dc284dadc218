"""Frame codec (docs/design.md §4): 20-byte big-endian header, chunking, zstd, reassembly.

Header: magic u16=0x5149 | version u8=1 | flags u8 | opcode u16 | chunk_index u16 |
request_id u32 | body_len u32 | header_crc u32 = zlib.crc32(bytes 0..15).
"""

def encode_header(flags: int, opcode: int, chunk_index: int, request_id: int, body_len: int) -> bytes:
    """20 header bytes. ValueError on out-of-range fields; BadFlags on unknown/NEED_ACK bits;
    ChunkTooLarge when body_len > 64 KiB."""

def decode_header(buf: bytes, offset: int = 0) -> tuple[int, int, int, int, int]:
    """(flags, opcode, chunk_index, request_id, body_len) of the 20 bytes at offset.
    Raises TruncatedFrame (< 20 bytes), BadMagic, BadCrc, BadVersion, BadFlags,
    ChunkTooLarge, in that order of checking."""

def encode_frame(opcode: int, request_id: int, body: bytes, compress: bool = False,
                 chunk_bytes: int = 65536) -> list[bytes]:
    """The wire chunks (header + chunk body each) of one frame. Compresses the whole body
    first when `compress` (flag on every chunk), then splits into chunks of at most
    `chunk_bytes` (1..65536) with chunk_index 0,1,..; MORE on all but the last. An empty
    body is one chunk with body_len 0. FrameTooLarge when the (compressed) body > 4 MiB
    or the uncompressed body > 4 MiB."""

def decompress_bounded(data: bytes, max_frame: int) -> bytes:
    """One complete zstd frame (no trailing bytes) decompressed to at most max_frame
    (0..2**32) bytes. FrameTooLarge when it would exceed max_frame, DecompressError when
    invalid, TypeError / ValueError on a bad argument."""

class FrameDecoder:
    """Incremental stream decoder: copes with partial reads, interleaved chunks of
    different frames (keyed by (opcode, request_id)), zstd with a bounded output.
    Any FrameError leaves the decoder poisoned: every later feed() raises again."""

    def __init__(self, max_frame: int = 4194304, max_partial_frames: int = 16) -> None: ...
    def feed(self, data: bytes) -> list[tuple[int, int, bytes]]:
        """Append `data`; return every frame completed by it as (opcode, request_id, body),
        body decompressed. Raises BadMagic/BadCrc/BadVersion/BadFlags/ChunkTooLarge on a
        header, ChunkOrder on a chunk_index gap or COMPRESSED differing between chunks of
        one frame or more than max_partial_frames open frames, FrameTooLarge when a
        reassembled or decompressed body exceeds max_frame, DecompressError on bad zstd."""
    @property
    def buffered(self) -> int:
        """Bytes held: partial header/chunk plus open reassemblies."""
    def at_boundary(self) -> bool:
        """True when no partial header, chunk body or reassembly is pending (EOF is clean)."""
