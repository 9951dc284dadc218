"""A user settled less than BUSY_SETTLE_S ago waits for it before its next settle, its
marks kept, unless a page came back full (qim/services/session/badge.py; docs/perf.md
"Round nine: a busy user settled once a second"): a recipient who keeps receiving was
summarized once a round, its whole unread window each time."""

from __future__ import annotations

import time
from types import SimpleNamespace

from qim.services.session import badge
from qim.services.session.badge import BUSY_SETTLE_S, SETTLE_PAGE, BadgeSettler
from qim.stores.badges import Dirty


class _Metrics:
    def __init__(self) -> None:
        self.deferred = 0

    def counter(self, name, *args, **kwargs):
        def inc(n=1):
            if name == "qim_session_badge_settles_deferred":
                self.deferred += n
        return SimpleNamespace(labels=lambda **kw: SimpleNamespace(inc=lambda n=1: None), inc=inc)


def _mark(user: int) -> Dirty:
    return Dirty(0, user, b"\x02" * 16, f"0:{user}:02", "1")


def _settler(marks: dict[int, Dirty], full: list[bool]) -> tuple[BadgeSettler, list[int], _Metrics]:
    """A settler over a store whose dirty page is `marks` (kept until settled, as the
    store keeps them), repeated to a full page while `full[0]`; the users it summarized."""
    summarized: list[int] = []

    async def dirty(client, n):
        page = list(marks.values())
        return (page * SETTLE_PAGE)[:SETTLE_PAGE] if full[0] else page

    async def wake_due(client, now, n):
        return None

    async def settle(shard, epoch, tenant, user, values, ms, wakes):
        marks.pop(user, None)
        return 1, 1, True

    async def summarize(tenant, user, convs):
        summarized.append(user)
        return {c: SimpleNamespace(left_at=0, muted_until=0, mentioned=False, unread=1) for c in convs}

    store = SimpleNamespace(clients=lambda: [object()], dirty=dirty, wake_due=wake_due, settle=settle,
                            dropped_marks=0)
    metrics = _Metrics()
    return BadgeSettler(store, summarize, lambda t, u: (1, 1), metrics), summarized, metrics


async def test_a_busy_user_waits_out_the_interval_others_do_not(monkeypatch):
    clock = [100.0]  # the settler's monotonic clock, moved by hand
    monkeypatch.setattr(badge, "time", SimpleNamespace(time=time.time, monotonic=lambda: clock[0]))
    marks = {7: _mark(7)}
    settler, summarized, metrics = _settler(marks, [False])
    assert await settler.round() == 1 and summarized == [7]
    marks[7], marks[8] = _mark(7), _mark(8)  # 7 receives again at once, 8 for the first time
    clock[0] += BUSY_SETTLE_S / 2
    assert await settler.round() == 1 and summarized == [7, 8]  # 8 at once, 7 waits
    assert 7 in marks and metrics.deferred == 1  # its mark kept, the wait counted
    clock[0] += BUSY_SETTLE_S / 2  # a whole interval since 7's settle
    assert await settler.round() == 1 and summarized == [7, 8, 7]
    assert marks == {}


async def test_a_full_page_settles_a_busy_user_at_once(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(badge, "time", SimpleNamespace(time=time.time, monotonic=lambda: clock[0]))
    marks, full = {7: _mark(7)}, [False]
    settler, summarized, metrics = _settler(marks, full)
    assert await settler.round() == 1
    marks[7], full[0] = _mark(7), True  # at once again, in a page that came back full
    assert await settler.round() == 1 and settler.backlog
    assert summarized == [7, 7] and 7 not in marks and metrics.deferred == 0
