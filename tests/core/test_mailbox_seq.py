"""mailbox_seq = shard_epoch (16) ‖ log_offset (48) (docs/design.md §3) on both implementations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qim.consts import MAILBOX_EPOCH_MAX, MAILBOX_OFFSET_MASK
from qim.errors import SeqError

from ._impls import COMPILED, PURE


def test_compose_one_zero_is_a_real_position(mailbox_seq) -> None:
    assert mailbox_seq.compose(1, 0) == 2**48
    assert mailbox_seq.is_valid(2**48) and not mailbox_seq.is_valid(0)
    assert mailbox_seq.split(2**48) == (1, 0)
    assert mailbox_seq.to_bytes(2**48) == b"\x00\x01\x00\x00\x00\x00\x00\x00"


def test_limits(mailbox_seq) -> None:
    top = mailbox_seq.compose(MAILBOX_EPOCH_MAX, MAILBOX_OFFSET_MASK)
    assert top == 2**63 - 1 and top < 2**63  # bit 63 clear: fits a CQL bigint
    assert mailbox_seq.to_bytes(top) == b"\x7f" + b"\xff" * 7
    assert mailbox_seq.from_bytes(b"\x7f" + b"\xff" * 7) == top
    for e, o in [(0, 0), (MAILBOX_EPOCH_MAX + 1, 0), (1, MAILBOX_OFFSET_MASK + 1), (-1, 0), (1, -1)]:
        with pytest.raises(SeqError):
            mailbox_seq.compose(e, o)


def test_monotone_across_epochs(mailbox_seq) -> None:
    assert mailbox_seq.compose(1, MAILBOX_OFFSET_MASK) < mailbox_seq.compose(2, 0)
    assert mailbox_seq.compose(3, 5) < mailbox_seq.compose(3, 6)


def test_bytes_round_trip_and_rejects(mailbox_seq) -> None:
    v = mailbox_seq.compose(7, 123456)
    raw = mailbox_seq.to_bytes(v)
    assert len(raw) == 8 and mailbox_seq.from_bytes(raw) == v
    assert mailbox_seq.from_bytes(bytearray(raw)) == v
    for bad in (raw[:7], raw + b"\0", b"", bytes(8), b"\x80" + raw[1:]):
        with pytest.raises(SeqError):
            mailbox_seq.from_bytes(bad)
    with pytest.raises(TypeError):
        mailbox_seq.from_bytes(12)


def test_non_int(mailbox_seq) -> None:
    assert mailbox_seq.is_valid("2") is False and mailbox_seq.is_valid(2.0**48) is False
    with pytest.raises(TypeError):
        mailbox_seq.split(2.0**48)
    with pytest.raises(TypeError):
        mailbox_seq.compose(1, 1.5)


@pytest.mark.parametrize("v", [0, 1, 2**48 - 1, 2**63, 2**64, -1, -(2**48)])
def test_invalid_values(mailbox_seq, v) -> None:
    assert mailbox_seq.is_valid(v) is False
    with pytest.raises(SeqError):
        mailbox_seq.split(v)
    with pytest.raises(SeqError):
        mailbox_seq.to_bytes(v)


def _call(fn, *args):
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001 - compared by class
        return ("error", type(e))


ints = st.one_of(st.integers(-10, 2**66), st.integers(2**47, 2**49), st.integers(0, 2**16))


@pytest.mark.differential
@settings(max_examples=500, deadline=None)
@given(a=ints, b=ints, raw=st.binary(max_size=10))
def test_differential(a, b, raw) -> None:
    p, c = PURE["mailbox_seq"], COMPILED["mailbox_seq"]
    assert _call(p.compose, a, b) == _call(c.compose, a, b)
    for fn in ("split", "is_valid", "to_bytes"):
        assert _call(getattr(p, fn), a) == _call(getattr(c, fn), a)
    assert _call(p.from_bytes, raw) == _call(c.from_bytes, raw)
    ok = _call(p.compose, a & 0x7FFF, b & MAILBOX_OFFSET_MASK)
    if ok[0] == "ok":
        assert c.split(ok[1]) == (a & 0x7FFF, b & MAILBOX_OFFSET_MASK)
        assert c.from_bytes(p.to_bytes(ok[1])) == ok[1]
