"""Bounded zstd of frame bodies (docs/design.md §4: a body is bounded by max_frame before and
after decompression), one definition for the compiled frame codec and its pure twin:
the work is zstandard's, so compiling the calls around it would gain nothing.

`decompress(data, max_frame)`: one complete zstd frame, no trailing bytes, to at most
max_frame bytes; FrameTooLarge past it, DecompressError when invalid. It never
allocates more than about max_frame whatever the frame claims (a hostile length costs
nothing): a declared content size (> 0) is the exact size of the one output buffer (a
frame that produces more or less fails); a frame without one, or declaring 0, is first
read through a stream reader capped at max_frame + 1, which bounds the second, checking
pass over the same frame (decoding is deterministic). Arguments are checked by the
callers (the codecs' `decompress_bounded`).
"""

from __future__ import annotations

import threading

import zstandard

from qim.errors import DecompressError, FrameTooLarge

ZSTD_LEVEL = 3
_tls = threading.local()  # zstd contexts are not safe for concurrent use


def compressor() -> zstandard.ZstdCompressor:
    """This thread's compressor (level ZSTD_LEVEL)."""
    c = getattr(_tls, "cctx", None)
    if c is None:
        c = _tls.cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    return c


def _dctx() -> zstandard.ZstdDecompressor:
    d = getattr(_tls, "dctx", None)
    if d is None:
        d = _tls.dctx = zstandard.ZstdDecompressor()
    return d


def decompress(data: bytes, max_frame: int) -> bytes:
    """The body of one zstd frame, bounded as the module doc says."""
    dctx = _dctx()
    try:
        declared = zstandard.frame_content_size(data)
    except zstandard.ZstdError as e:
        raise DecompressError(f"bad zstd frame header: {e}") from None
    if declared > max_frame:
        raise FrameTooLarge(f"zstd content size {declared} > {max_frame}")
    try:
        if declared > 0:  # a buffer of exactly the declared size: more, less or extra bytes fail
            return dctx.decompress(data, allow_extra_data=False)
        size = len(dctx.stream_reader(data, read_across_frames=False).read(max_frame + 1))
        if declared == 0 and size:  # checked first: an empty frame's reader may read on into the next
            raise DecompressError("zstd frame holds more than its declared content size 0")
        if size > max_frame:
            raise FrameTooLarge(f"decompressed body exceeds {max_frame}")
        dobj = dctx.decompressobj()
        out = dobj.decompress(data)
    except zstandard.ZstdError as e:
        raise DecompressError(f"bad zstd body: {e}") from None
    if not dobj.eof or dobj.unused_data:
        raise DecompressError("zstd body is truncated or has trailing bytes")
    return out
