"""Member intervals (docs/design.md §7; qim/stores/intervals.py): pure logic."""

from __future__ import annotations

import pytest

from qim.stores.intervals import ascending_ranges, contains, descending_ranges, is_current, latest, parse_intervals

REJOINED = parse_intervals(b"0:4,6:9,12:0")  # member until 4, again 7..9, again since 13


def test_parse_keeps_every_interval_in_order():
    assert REJOINED == ((0, 4), (6, 9), (12, None))
    assert is_current(REJOINED) and not is_current(parse_intervals(b"0:4,6:9"))
    assert latest(REJOINED) == (12, None)


@pytest.mark.parametrize("raw", [b"", b"4", b"a:1", b"0:0,6:0", b"0:9,5:0", b"5:5", b"0:4,,6:0"])
def test_parse_refuses_malformed_values(raw):
    with pytest.raises(ValueError):
        parse_intervals(raw)


def test_visibility_is_the_union_without_the_gaps():
    visible = [s for s in range(1, 16) if contains(REJOINED, s)]
    assert visible == [1, 2, 3, 4, 7, 8, 9, 13, 14, 15]


def test_ranges_for_paging_skip_the_gaps_and_respect_the_anchor():
    assert ascending_ranges(REJOINED, 0) == [(0, 4), (6, 9), (12, None)]
    assert ascending_ranges(REJOINED, 5) == [(6, 9), (12, None)]  # an anchor inside a gap
    assert ascending_ranges(REJOINED, 8) == [(8, 9), (12, None)]
    assert ascending_ranges(REJOINED, 20) == [(20, None)]
    assert descending_ranges(REJOINED, None) == [(12, None), (6, 9), (0, 4)]
    assert descending_ranges(REJOINED, 11) == [(6, 9), (0, 4)]  # OLDER from anchor 12: seq <= 11
    assert descending_ranges(REJOINED, 8) == [(6, 8), (0, 4)]
    assert descending_ranges(REJOINED, 0) == []
