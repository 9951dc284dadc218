"""Fuzz target 2: zstd bodies through decompress_bounded, compiled and pure.

Properties, for every payload of tests/fuzz/zstd_gen.py and every max_frame:
- the only exceptions are FrameTooLarge and DecompressError; a result is bytes of at
  most max_frame;
- compiled and pure give the same result or the same exception class;
- where the payload's fate is known (well-formed frames, bombs, lying sizes): exactly
  that outcome and content;
- memory: the Python allocations during one call (tracemalloc peak) stay within
  max_frame + the input + SLACK_BYTES, whatever the frame expands to. libzstd's own
  buffers are not traced; the engine's RSS limit (tests/fuzz/engine.py) bounds them.
"""

from __future__ import annotations

import tracemalloc

from qim._core._pure import frame as pure_frame
from qim.consts import MAX_FRAME_BODY
from qim.errors import DecompressError, FrameTooLarge
from tests.fuzz.draw import Draw, Finding
from tests.fuzz.zstd_gen import BAD, REFUSED, TOO_LARGE, Expect, payload

# Bookkeeping allocated around the output during one call (zstd objects, the result's
# header, the probe reader): measured below 160 KiB; a second copy of a 4 MiB body is not.
SLACK_BYTES = 512 * 1024
REFUSALS = (FrameTooLarge, DecompressError)


def _compiled():
    from qim._core import frame  # the compiled module unless QIM_PUREPYTHON=1

    return frame


def impls() -> tuple:
    """(name, module) pairs to compare: pure always, compiled unless pure-only mode."""
    import qim._core

    pairs = [("pure", pure_frame)]
    if qim._core.COMPILED:
        pairs.append(("compiled", _compiled()))
    return tuple(pairs)


def draw_max_frame(d: Draw) -> int:
    """The 4 MiB limit mostly, sometimes a small one (limits hit with small inputs)."""
    return MAX_FRAME_BODY if d.chance(170) else d.choice((0, 1, 100, 4096, 65536, d.between(0, 70_000)))


def bounded_call(mod, data: bytes, max_frame: int) -> tuple[object, int]:
    """(result bytes or the refusal's class name, tracemalloc peak bytes of the call)."""
    tracemalloc.reset_peak()
    start = tracemalloc.get_traced_memory()[0]
    try:
        out: object = mod.decompress_bounded(data, max_frame)
    except REFUSALS as exc:
        out = type(exc).__name__
    except Exception as exc:  # noqa: BLE001 - anything else is the finding
        raise Finding(f"{mod.__name__}.decompress_bounded raised {type(exc).__name__}: {exc}") from exc
    return out, tracemalloc.get_traced_memory()[1] - start


def check(data: bytes, max_frame: int, expect: Expect) -> None:
    """Every property of the module doc for one payload."""
    if not tracemalloc.is_tracing():
        tracemalloc.start()
    outcomes = []
    for name, mod in impls():
        out, peak = bounded_call(mod, data, max_frame)
        if isinstance(out, bytes) and len(out) > max_frame:
            raise Finding(f"{name}: {len(out)} bytes returned past max_frame {max_frame}")
        bound = max_frame + len(data) + SLACK_BYTES
        if peak > bound:
            raise Finding(f"{name}: {peak} bytes allocated for a {len(data)}-byte payload "
                          f"(max_frame {max_frame}, bound {bound}, outcome {_show(out)})")
        outcomes.append((name, out))
    (first, a), *others = outcomes
    for name, b in others:
        if a != b:
            raise Finding(f"twins disagree: {first} {_show(a)}, {name} {_show(b)}")
    if expect.outcome is None:
        return
    if expect.outcome == REFUSED:
        if a not in (TOO_LARGE, BAD):
            raise Finding(f"expected a refusal, got {_show(a)}")
        return
    if expect.outcome in (TOO_LARGE, BAD):
        if a != expect.outcome:
            raise Finding(f"expected {expect.outcome}, got {_show(a)}")
        return
    if not isinstance(a, bytes) or len(a) != expect.size or (expect.content and a != expect.content()):
        raise Finding(f"a well-formed {expect.size}-byte frame decoded to {_show(a)}")


def _show(out: object) -> str:
    return f"{len(out)} bytes" if isinstance(out, bytes) else str(out)


def one_input(data: bytes) -> None:
    """One fuzz input: a max_frame and a payload drawn from `data`, checked (Finding)."""
    d = Draw(data)
    max_frame = draw_max_frame(d)
    raw, expect = payload(d, max_frame)
    check(raw, max_frame, expect)
