"""Reconnect waits are jittered (qim/sdk/reconnect.py `jittered`; docs/design.md §13): the
clients of a gateway that died do not come back to the others in one burst. Pure logic."""

from __future__ import annotations

import random

from qim.sdk.reconnect import jittered


def test_a_wait_is_spread_over_half_to_one_and_a_half_of_it():
    random.seed(20)
    waits = [jittered(2.0) for _ in range(500)]
    assert all(1.0 <= w <= 3.0 for w in waits)
    # spread over the whole range, not one value: a thousand clients would not line up
    assert min(waits) < 1.1 and max(waits) > 2.9
    assert len({round(w, 3) for w in waits}) > 400
