"""Frame codec (docs/design.md §4): the compiled module against its pure-Python twin on
random, partly corrupted streams and header fields (hypothesis): same frames, same
error classes, same state."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ._impls import COMPILED, PURE

# --- differential: compiled vs pure on random, partly corrupted streams ---------------

def _run(mod, wire: bytes, cuts: list[int], max_frame: int):
    dec = mod.FrameDecoder(max_frame=max_frame, max_partial_frames=4)
    got = []
    prev = 0
    try:
        for cut in sorted(set(cuts)) + [len(wire)]:
            got += dec.feed(wire[prev:cut])
            prev = cut
    except Exception as e:  # noqa: BLE001 - compared by class
        return ("error", type(e), got)
    return ("ok", got, dec.buffered, dec.at_boundary())


frames_st = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 5), st.binary(max_size=300), st.booleans(),
              st.integers(1, 120)),
    max_size=5,
)


@pytest.mark.differential
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames=frames_st, flip=st.one_of(st.none(), st.tuples(st.integers(0), st.integers(1, 255))),
       cuts=st.lists(st.integers(0, 3000), max_size=6), max_frame=st.integers(0, 400),
       shuffle=st.randoms(use_true_random=False))
def test_differential_decoder(frames, flip, cuts, max_frame, shuffle) -> None:
    chunks = []
    for op, rid, body, comp, step in frames:
        chunks += PURE["frame"].encode_frame(op, rid, body, compress=comp, chunk_bytes=step)
    if len(chunks) > 1 and shuffle.random() < 0.3:
        shuffle.shuffle(chunks)
    wire = bytearray(b"".join(chunks))
    if flip is not None and wire:
        wire[flip[0] % len(wire)] ^= flip[1]
    wire = bytes(wire)
    assert _run(PURE["frame"], wire, cuts, max_frame) == _run(COMPILED["frame"], wire, cuts,
                                                              max_frame)


def _call(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 - compared by class
        return ("error", type(e))


@pytest.mark.differential
@settings(max_examples=300, deadline=None)
@given(fields=st.tuples(st.integers(-2, 300), st.integers(-1, 1 << 17), st.integers(-1, 1 << 17),
                        st.integers(-1, 1 << 33), st.integers(-1, 1 << 17)),
       raw=st.binary(min_size=0, max_size=40), offset=st.integers(-2, 25))
def test_differential_header(fields, raw, offset) -> None:
    p, c = PURE["frame"], COMPILED["frame"]
    assert _call(p.encode_header, *fields) == _call(c.encode_header, *fields)
    assert _call(p.decode_header, raw, offset) == _call(c.decode_header, raw, offset)
    good = _call(p.encode_header, *fields)
    if good[0] == "ok":
        assert _call(p.decode_header, good[1]) == _call(c.decode_header, good[1])
