"""Frame sequences for the live gateway target (tests/fuzz/test_live_gateway.py).

`sequence(d, token_for)` -> Sequence: what one client connection sends: maybe an AUTH
(a real token from `token_for(user, device)`, or a broken one), then requests of any
opcode with bodies from proto_gen.py, any request id (0 and repeats included), chunked,
COMPRESSED or not, interleaved, and sometimes a frame fault (a hand-made chunk, junk, a
mutated chunk, a zstd bomb). `requests` is what the gateway can decode before the
first fault (the same FrameDecoder as the gateway, fed the same chunks); `fault` says
whether the stream breaks after them (then the gateway must close the connection).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from qim._core import frame as frame_codec
from qim.errors import FrameError
from qim.proto.v1 import connection_pb2
from qim.protocol import Opcode
from tests.fuzz.draw import Draw
from tests.fuzz.proto_gen import Ctx, body
from tests.fuzz.stream_gen import handmade, interleave, mutate_chunks, split
from tests.fuzz.target_requests import OTHER_OPCODES, REQUEST_CLASSES
from tests.fuzz.zstd_gen import payload

USERS = tuple(range(9_300_001, 9_300_041))  # a pool: reconnects, kicks and per-user limits happen


@dataclass
class Sequence:
    """One connection's bytes, the requests the gateway decodes from them, and whether a
    frame fault follows those requests."""

    wire: bytes
    requests: list[tuple[int, int, bytes]]
    fault: bool
    authed: bool
    chunks: tuple[bytes, ...] = ()  # `wire` chunk by chunk (the WebSocket target sends one per message)


def _frames(d: Draw, ctx: Ctx, token_for: Callable[[int, int], str]) -> tuple[list[list[bytes]], bool]:
    frames: list[list[bytes]] = []
    authed = False
    how = d.below(10)
    if how < 7:
        token = token_for(ctx.user, d.between(1, 3))
        frames.append(split(Opcode.AUTH, d.between(1, 5), connection_pb2.Auth(token=token).SerializeToString(),
                            False, 65536))
        authed = True
    elif how < 8:
        frames.append(split(Opcode.AUTH, 1, body(d, connection_pb2.Auth, ctx), False, 65536))
    for _ in range(d.below(7)):
        opcode = d.choice(tuple(REQUEST_CLASSES)) if d.chance(230) else d.choice(OTHER_OPCODES)
        cls = REQUEST_CLASSES.get(opcode) or d.choice(tuple(REQUEST_CLASSES.values()))
        raw = body(d, cls, ctx)
        rid = d.choice((d.between(6, 1 << 20), d.between(6, 1 << 20), 0, 7, 0xFFFFFFFF))
        step = d.choice((65536, 65536, 16384, 1000, 7))
        if d.chance(40):
            frames.append(split(opcode, rid, frame_codec.encode_frame(opcode, rid, raw, compress=True)[0][20:]
                                if len(raw) < 60_000 else raw, len(raw) < 60_000, step))
        else:
            frames.append(split(opcode, rid, raw, False, step))
    return frames, authed


def sequence(d: Draw, token_for: Callable[[int, int], str]) -> Sequence:
    """One connection's worth of bytes (see the module doc)."""
    ctx = Ctx(tenant=0, user=d.choice(USERS), peer=d.choice(USERS), group=d.choice((11, 12, 1 << 40)))
    frames, authed = _frames(d, ctx, token_for)
    head, *rest = frames or [[]]
    order, _, _ = interleave(d, rest, 8)  # the AUTH goes first, whole, as a client sends it
    chunks = head + order
    fault = d.below(8)
    if fault == 0:
        chunks = mutate_chunks(d, chunks)
    elif fault == 1:
        chunks.insert(d.below(len(chunks) + 1), handmade(d))
    elif fault == 2:
        bomb, _ = payload(d, 4 << 20)
        chunks += split(Opcode.SEND_MESSAGE, 99, bomb[:65536 * 8], True, 65536)
    requests: list[tuple[int, int, bytes]] = []
    dec = frame_codec.FrameDecoder()
    broken = False
    for chunk in chunks:  # what the gateway can decode before a fault (it may lose the last read's)
        try:
            requests.extend(dec.feed(chunk))
        except FrameError:
            broken = True
            break
    # an unfinished tail is a fault too, at EOF
    return Sequence(b"".join(chunks), requests, broken or not dec.at_boundary(), authed, tuple(chunks))
