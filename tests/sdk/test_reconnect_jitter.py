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


def test_the_first_reconnect_after_a_lost_connection_is_spread_over_a_whole_window():
    # decision 0078: a first retry of 25-75 ms brought every device of a restarted
    # gateway back in one burst; now full jitter over min(FIRST_SPREAD_S, cap)
    from qim.sdk.reconnect import FIRST_SPREAD_S, reconnect_wait

    random.seed(21)
    waits = [reconnect_wait(0.05, 0.0, True, 2.0) for _ in range(2000)]
    assert all(0.0 <= w <= FIRST_SPREAD_S for w in waits)
    # about a tenth in each tenth of the window: spread, not bunched at the start
    tenths = [sum(1 for w in waits if i / 10 <= w / FIRST_SPREAD_S < (i + 1) / 10) for i in range(10)]
    assert min(tenths) > 140, tenths
    assert all(w <= 0.5 for w in (reconnect_wait(0.05, 0.0, True, 0.5) for _ in range(200)))  # never past the cap
    # later attempts keep the doubling backoff's jitter
    assert all(0.5 <= reconnect_wait(1.0, 0.0, False, 2.0) <= 1.5 for _ in range(200))


def test_a_retry_hint_is_the_earliest_retry_and_is_spread():
    from qim.sdk.reconnect import reconnect_wait

    random.seed(22)
    waits = [reconnect_wait(0.05, 3.0, True, 2.0) for _ in range(500)]
    assert all(3.0 <= w <= 3.3 for w in waits)
    assert max(waits) - min(waits) > 0.25  # clients refused together do not return together
