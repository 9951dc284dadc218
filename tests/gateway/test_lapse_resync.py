"""The reconnect ramp after a lapsed node lease (qim/services/gateway/lapse.py;
docs/decisions/0154): every connection held is closed once, at a moment inside the
spread window, with the reason counted as lease_lapsed; one that fails to close does
not stop the others; the window grows with the number of connections, within bounds."""

from __future__ import annotations

import asyncio

from qim.services.gateway import lapse


class Conn:
    def __init__(self, fail: bool = False) -> None:
        self.reaped: list[tuple[str, float]] = []
        self.fail = fail

    def reap(self, reason: str) -> None:
        self.reaped.append((reason, asyncio.get_running_loop().time()))
        if self.fail:
            raise RuntimeError("already closed")


def test_the_window_follows_the_count_within_its_bounds():
    low, high = lapse.RESYNC_SPREAD_S
    assert lapse.spread_s(0) == low and lapse.spread_s(1) == low
    assert lapse.spread_s(int(lapse.RESYNC_LOGINS_PER_S * 10)) == 10.0
    assert lapse.spread_s(10_000_000) == high


async def test_every_connection_is_closed_once_inside_the_window():
    conns = [Conn(fail=(i == 3)) for i in range(50)]
    start = asyncio.get_running_loop().time()
    assert lapse.resync_all(lambda: conns, 12.0) == 50
    await asyncio.sleep(lapse.spread_s(50) + 0.3)
    assert all(len(c.reaped) == 1 and c.reaped[0][0] == "lease_lapsed" for c in conns)
    moments = sorted(c.reaped[0][1] - start for c in conns)
    assert moments[-1] <= lapse.spread_s(50) + 0.2
    assert moments[-1] - moments[0] > 0.2  # a ramp, not one burst
