"""Packed 64-lane watermark (docs/design.md §3) on both implementations."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qim.errors import WatermarkError

from ._impls import COMPILED, PURE

M = (1 << 48) - 1


def rec(flags, w, floor, reserved=0) -> bytes:
    return struct.pack(">BQQH", flags, w, floor, reserved)


def test_empty_starts_at_zero_never_w_plus_one(watermark) -> None:
    blob = watermark.empty()
    assert blob == bytes(19)
    assert watermark.decode(blob) == [(0, 0, 0)] * 64
    assert watermark.start_offset(blob) == 0
    assert all(watermark.visible_offset(blob, lane) == -1 for lane in range(64))


def test_first_record_of_partition(watermark) -> None:
    blob = watermark.advance_all(watermark.empty(), 0)
    assert blob == rec(1, 0, 0)
    assert watermark.start_offset(blob) == 1
    assert watermark.visible_offset(blob, 5) == 0


def test_uniform_blob_stays_19_bytes(watermark) -> None:
    blob = watermark.empty()
    for off in (0, 1, 5, 5, 3, 1000):  # a duplicate / older record still "advances" (no-op)
        blob = watermark.advance_all(blob, off)
        assert len(blob) == 19
    assert watermark.decode(blob) == [(1, 1000, 0)] * 64
    assert watermark.start_offset(blob) == 1001


def test_per_lane_form_and_canonical_encoding(watermark) -> None:
    records = [(1, 10 + i, 3) for i in range(64)]
    blob = watermark.encode(records)
    assert len(blob) == 1216 and blob[:19] == rec(1, 10, 3)
    assert watermark.decode(blob) == records
    assert watermark.start_offset(blob) == 11
    assert [watermark.visible_offset(blob, i) for i in (0, 63)] == [10, 73]
    # advancing past every lane makes all 64 equal: written back in the 19-byte form
    assert watermark.advance_all(blob, 500) == rec(1, 500, 3)
    assert watermark.encode([(1, 9, 9)] * 64) == rec(1, 9, 9)
    assert watermark.encode(tuple([1, 9, 9] for _ in range(64))) == rec(1, 9, 9)
    assert watermark.decode(rec(1, 9, 9) * 64) == [(1, 9, 9)] * 64


def test_mixed_lanes_start_offset(watermark) -> None:
    records = [(1, 100, 0)] * 63 + [(0, 0, 0)]
    blob = watermark.encode(records)
    assert watermark.start_offset(blob) == 0  # an empty lane forces offset 0
    assert watermark.visible_offset(blob, 63) == -1 and watermark.visible_offset(blob, 0) == 100


def test_recomputed_flag_preserved(watermark) -> None:
    blob = watermark.advance_all(rec(2, 0, 0), 7)
    assert watermark.decode(blob)[0] == (3, 7, 0)


@pytest.mark.parametrize("blob", [
    b"", bytes(18), bytes(20), bytes(1215), bytes(1217), bytes(19 * 2),
    rec(4, 0, 0), rec(0x80, 0, 0), rec(0, 0, 0, 1), rec(1, 1, 1, 0x8000),
    rec(1, 1 << 48, 0), rec(1, 5, 1 << 48), rec(1, 4, 5), rec(3, 0, 1),
    rec(1, 5, 5) * 63 + rec(1, 5, 5, 1), rec(1, 5, 5) * 10 + rec(8, 5, 5) + rec(1, 5, 5) * 53,
])
def test_decode_fails_closed(watermark, blob) -> None:
    for fn in (watermark.decode, watermark.start_offset):
        with pytest.raises(WatermarkError):
            fn(blob)
    with pytest.raises(WatermarkError):
        watermark.advance_all(blob, 1)
    with pytest.raises(WatermarkError):
        watermark.visible_offset(blob, 0)


def test_unmaterialized_lane_may_hold_floor(watermark) -> None:
    # W < W_floor is only an error on a materialized lane
    assert watermark.decode(rec(0, 0, 10)) == [(0, 0, 10)] * 64
    with pytest.raises(WatermarkError):
        watermark.advance_all(rec(0, 0, 10), 9)  # would materialize W=9 below the floor
    assert watermark.advance_all(rec(0, 0, 10), 10) == rec(1, 10, 10)


@pytest.mark.parametrize("records", [
    [(0, 0, 0)] * 63, [(0, 0, 0)] * 65, [(4, 0, 0)] * 64, [(1, 1, 2)] * 64,
    [(1, M + 1, 0)] * 64, [(0, 0, -1)] * 64, [(256, 0, 0)] * 64, [(1, 2)] * 64, [5] * 64, 7,
])
def test_encode_rejects(watermark, records) -> None:
    with pytest.raises(WatermarkError):
        watermark.encode(records)


def test_argument_errors(watermark) -> None:
    for lane in (-1, 64, 1000):
        with pytest.raises(ValueError) as info:
            watermark.visible_offset(watermark.empty(), lane)
        assert type(info.value) is ValueError
    with pytest.raises(TypeError):
        watermark.visible_offset(watermark.empty(), 1.0)
    for off in (-1, M + 1):
        with pytest.raises(WatermarkError):
            watermark.advance_all(watermark.empty(), off)
    with pytest.raises(TypeError):
        watermark.decode("x" * 19)
    with pytest.raises(TypeError):
        watermark.encode([(1, 1.0, 0)] * 64)
    assert watermark.decode(bytearray(rec(1, 3, 2)))[0] == (1, 3, 2)


def _call(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 - compared by class
        return ("error", type(e))


record_st = st.tuples(st.sampled_from([0, 1, 2, 3, 4, 0x81]),
                      st.one_of(st.integers(0, 20), st.integers(M - 2, M + 2)),
                      st.one_of(st.integers(0, 20), st.integers(M - 2, M + 2)))
blob_st = st.one_of(
    st.builds(lambda r: rec(*r), record_st.filter(lambda r: r[1] <= 2**64 - 1)),
    st.lists(record_st, min_size=64, max_size=64).map(
        lambda rs: b"".join(rec(*r) for r in rs)),
    st.binary(max_size=40),
)


@pytest.mark.differential
@settings(max_examples=300, deadline=None)
@given(blob=blob_st, off=st.integers(-2, M + 2), lane=st.integers(-1, 65),
       records=st.lists(record_st, min_size=63, max_size=65))
def test_differential(blob, off, lane, records) -> None:
    p, c = PURE["watermark"], COMPILED["watermark"]
    for fn in ("decode", "start_offset"):
        assert _call(getattr(p, fn), blob) == _call(getattr(c, fn), blob)
    assert _call(p.advance_all, blob, off) == _call(c.advance_all, blob, off)
    assert _call(p.visible_offset, blob, lane) == _call(c.visible_offset, blob, lane)
    assert _call(p.encode, records) == _call(c.encode, records)
    uniform = [records[0]] * 64
    assert _call(p.encode, uniform) == _call(c.encode, uniform)
