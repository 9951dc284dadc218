"""Fuzz target 1: FrameDecoder, compiled and pure, on byte streams.

An input becomes a decoder configuration (max_frame, open-frame cap) and a stream:
arbitrary bytes, or a stream built from frames (stream_gen.py: chunked, interleaved,
COMPRESSED with any zstd payload, hand-made chunks with valid CRCs and odd fields,
then sometimes mutated), cut into reads at drawn places. Properties:
- the only exceptions are the FrameError family; after one, the decoder is poisoned
  (the next feed raises the same class);
- compiled and pure agree feed by feed: frames, exception class, `buffered`,
  `at_boundary()`;
- every body is at most max_frame; `buffered` never exceeds the open-frame cap times
  max_frame plus one unparsed chunk (reassembly state is bounded);
- a stream built without faults decodes to exactly its frames, in the order their last
  chunks arrived, and ends at a boundary.
"""

from __future__ import annotations

from qim.consts import FRAME_HEADER_LEN, STREAM_WRITE_CHUNK_BYTES
from qim.errors import FrameError
from tests.fuzz.draw import Draw, Finding
from tests.fuzz.stream_gen import build_stream, cut_points
from tests.fuzz.target_zstd import draw_max_frame, impls

PARTIAL_CAPS = (16, 16, 1, 2, 3, 4)


def trace(mod, max_frame: int, max_partial: int, pieces: list[bytes]) -> list:
    """Feed `pieces` one by one; per feed ("ok", frames, buffered, at_boundary) or, at
    the first FrameError, ("error", class name, poisoned-again class name) and stop."""
    dec = mod.FrameDecoder(max_frame=max_frame, max_partial_frames=max_partial)
    steps: list = []
    bound = max_partial * max_frame + FRAME_HEADER_LEN + STREAM_WRITE_CHUNK_BYTES
    for piece in pieces:
        try:
            frames = dec.feed(piece)
        except FrameError as exc:
            try:
                dec.feed(b"")
                again = "no error"
            except FrameError as exc2:
                again = type(exc2).__name__
            steps.append(("error", type(exc).__name__, again))
            return steps
        except Exception as exc:  # noqa: BLE001 - anything else is the finding
            raise Finding(f"{mod.__name__}: feed raised {type(exc).__name__}: {exc}") from exc
        for _, _, body in frames:
            if len(body) > max_frame:
                raise Finding(f"{mod.__name__}: a {len(body)}-byte body past max_frame {max_frame}")
        if dec.buffered > bound:
            raise Finding(f"{mod.__name__}: {dec.buffered} bytes held, bound {bound}")
        steps.append(("ok", frames, dec.buffered, dec.at_boundary()))
    return steps


def one_input(data: bytes) -> None:
    """One fuzz input (see the module doc); raises Finding."""
    d = Draw(data)
    max_frame = draw_max_frame(d)
    max_partial = d.choice(PARTIAL_CAPS)
    if d.chance(40):
        wire, expected = d.blob(4096), None
    else:
        wire, expected = build_stream(d, max_frame, max_partial)
    pieces = cut_points(d, wire)
    traces = [(name, trace(mod, max_frame, max_partial, pieces)) for name, mod in impls()]
    (first, a), *others = traces
    for name, b in others:
        if a != b:
            raise Finding(f"twins disagree: {first} {_summary(a)} / {name} {_summary(b)}")
    for step in a:
        if step[0] == "error" and step[1] != step[2]:
            raise Finding(f"not poisoned: {step[1]} then {step[2]}")
    if expected is None:
        return
    if a and a[-1][0] == "error":
        raise Finding(f"a well-formed stream raised {a[-1][1]}")
    got = [f for step in a for f in step[1]]
    if got != expected:
        raise Finding(f"a well-formed stream decoded to {len(got)} frames, expected {len(expected)}")
    if a and not a[-1][3]:
        raise Finding("a well-formed stream did not end at a frame boundary")


def _summary(steps: list) -> str:
    return str([s if s[0] == "error" else ("ok", [(op, rid, len(b)) for op, rid, b in s[1]], *s[2:])
                for s in steps])[:300]
