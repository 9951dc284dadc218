"""Byte streams for the frame decoder target (tests/fuzz/target_frames.py).

`build_stream(d, max_frame, max_partial)` -> (wire, expected): frames split into chunks
(any chunk size, COMPRESSED with a payload from zstd_gen), interleaved chunk by chunk
in a drawn order, with hand-made chunks (valid CRC, odd flags, indexes, lengths) and
junk mixed in, and sometimes one mutation (a chunk dropped, repeated or swapped, a byte
flipped). `expected` is the list of (opcode, request_id, body) the decoder must return
when the stream is well formed (unique keys, bodies and payloads within max_frame, at
most max_partial multi-chunk frames open at once, nothing hand-made), else None.
"""

from __future__ import annotations

import struct
import zlib
from typing import Optional

from qim.consts import FLAG_COMPRESSED, FLAG_MORE, FRAME_MAGIC, STREAM_WRITE_CHUNK_BYTES
from tests.fuzz.draw import Draw
from tests.fuzz.zstd_gen import payload

OPCODES = (0x0101, 0x0103, 0x0201, 0x0301, 0x0502, 0x7F01, 0xFFFF, 0)
CHUNK_SIZES = (1, 7, 100, 1000, 16384, STREAM_WRITE_CHUNK_BYTES)
MAX_CHUNKS = 2048  # keeps one input's work bounded (a 4 MiB body is 64 chunks of 64 KiB)
Frame = tuple[int, int, bytes]


def header(flags: int, opcode: int, index: int, rid: int, body_len: int, magic: int = FRAME_MAGIC,
           version: int = 1, crc_ok: bool = True) -> bytes:
    """20 header bytes with any field values (no checks: the decoder is under test)."""
    pre = struct.pack(">HBBHHII", magic, version, flags, opcode, index, rid, body_len)
    crc = zlib.crc32(pre) if crc_ok else zlib.crc32(pre) ^ 0x1
    return pre + struct.pack(">I", crc)


def split(opcode: int, rid: int, data: bytes, compressed: bool, step: int) -> list[bytes]:
    """The chunks of one frame as a conforming sender writes them (no size limit here)."""
    step = max(step, -(-len(data) // MAX_CHUNKS))
    parts = [data[i:i + step] for i in range(0, len(data), step)] or [b""]
    flags = FLAG_COMPRESSED if compressed else 0
    return [header(flags | (FLAG_MORE if i + 1 < len(parts) else 0), opcode, i, rid, len(p)) + p
            for i, p in enumerate(parts)]


def _frame(d: Draw, max_frame: int) -> tuple[list[bytes], Optional[Frame], tuple[int, int]]:
    """(chunks, the frame the decoder must return or None, key) of one sender frame."""
    opcode = d.choice(OPCODES)
    rid = d.choice((1, 2, 3, 0, d.uint(4)))
    step = d.choice(CHUNK_SIZES)
    if d.chance(70):
        data, expect = payload(d, max_frame)
        ok = expect.outcome == "ok" and len(data) <= max_frame and expect.content is not None
        return split(opcode, rid, data, True, step), (opcode, rid, expect.content()) if ok else None, (opcode, rid)
    if d.chance(32):
        size = max(0, d.choice((0, 1, 65535, 65536, 65537, max_frame - 1, max_frame, max_frame + 1, 200_000)))
        body = d.sized(min(size, 1 << 23))
    else:
        body = d.blob(300)
    good = (opcode, rid, body) if len(body) <= max_frame else None
    return split(opcode, rid, body, False, step), good, (opcode, rid)


def handmade(d: Draw) -> bytes:
    """One chunk with drawn header fields and a valid CRC most of the time."""
    flags = d.uint(1) & (0x03 if d.chance(220) else 0xFF)
    body = d.blob(200)
    body_len = len(body) if d.chance(200) else d.choice((0, len(body) + 1, 65536, 65537, 0xFFFFFFFF))
    magic = FRAME_MAGIC if d.chance(240) else d.uint(2)
    version = 1 if d.chance(240) else d.uint(1)
    return header(flags, d.choice(OPCODES), d.choice((0, 1, 2, d.uint(2))), d.choice((1, 2, 0, d.uint(4))),
                  body_len, magic, version, d.chance(240)) + body


def interleave(d: Draw, frames: list[list[bytes]], max_partial: int) -> tuple[list[bytes], list[int], bool]:
    """Chunks of all frames in a drawn order keeping each frame's own order; the index
    of the frame each chunk belongs to; False when more than max_partial multi-chunk
    frames would be open at once."""
    nexts = [0] * len(frames)
    live = [i for i, f in enumerate(frames) if f]
    order: list[bytes] = []
    owner: list[int] = []
    open_multi: set[int] = set()
    within_cap = True
    while live:
        i = live[d.below(len(live))]
        order.append(frames[i][nexts[i]])
        owner.append(i)
        nexts[i] += 1
        if len(frames[i]) > 1:
            open_multi.add(i)
            within_cap &= len(open_multi) <= max_partial
        if nexts[i] == len(frames[i]):
            live.remove(i)
            open_multi.discard(i)
    return order, owner, within_cap


def mutate_chunks(d: Draw, chunks: list[bytes]) -> list[bytes]:
    """One change a broken or hostile sender makes."""
    if not chunks:
        return [d.blob(40)]
    i = d.below(len(chunks))
    how = d.below(5)
    if how == 0:
        return chunks[:i] + chunks[i + 1:]
    if how == 1:
        return chunks[:i + 1] + chunks[i:]
    if how == 2 and i + 1 < len(chunks):
        return chunks[:i] + [chunks[i + 1], chunks[i]] + chunks[i + 2:]
    raw = bytearray(chunks[i] or b"\0")
    raw[d.below(len(raw))] ^= d.between(1, 255)
    return chunks[:i] + [bytes(raw)] + chunks[i + 1:]


def build_stream(d: Draw, max_frame: int, max_partial: int) -> tuple[bytes, Optional[list[Frame]]]:
    """A stream and the frames it must decode to (None when it is not well formed)."""
    per_frame: list[list[bytes]] = []
    wanted: list[Optional[Frame]] = []
    keys: set[tuple[int, int]] = set()
    clean = True
    for _ in range(d.below(7)):
        what = d.below(10)
        if what < 8:
            chunks, good, key = _frame(d, max_frame)
            clean &= good is not None and key not in keys
            keys.add(key)
        else:
            chunks, good = ([handmade(d)] if what == 8 else [d.blob(64)]), None
            clean = False
        per_frame.append(chunks)
        wanted.append(good)
    order, owner, within_cap = interleave(d, per_frame, max_partial)
    if d.chance(40):
        order = mutate_chunks(d, order)
        clean = False
    if not (clean and within_cap):
        return b"".join(order), None
    last = {i: pos for pos, i in enumerate(owner)}  # a frame completes with its last chunk
    expected = [wanted[i] for i in sorted(last, key=last.__getitem__)]
    return b"".join(order), [f for f in expected if f is not None]


def cut_points(d: Draw, wire: bytes) -> list[bytes]:
    """`wire` split into the reads a socket could deliver (sometimes one byte at a time)."""
    if len(wire) <= 300 and d.chance(30):
        return [wire[i:i + 1] for i in range(len(wire))] or [b""]
    marks = sorted({d.below(len(wire) + 1) for _ in range(d.below(9))} | {0, len(wire)})
    return [wire[a:b] for a, b in zip(marks, marks[1:])] or [wire]
