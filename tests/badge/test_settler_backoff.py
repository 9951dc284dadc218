"""A user whose badge page keeps failing (a record missing: PageError) is retried with a
growing pause, its marks kept (qim/services/session/badge.py): a CI run's settler retried
one such user every 200 ms for minutes, a warning each time."""

from __future__ import annotations

import time
from types import SimpleNamespace

from qim.services.session import badge
from qim.services.session.badge import BadgeSettler
from qim.services.session.summary import PageError
from qim.stores.badges import Dirty

MARK = Dirty(0, 7, b"\x02" * 16, "0:7:02", "1")


class _Metrics:
    def counter(self, *args, **kwargs):
        return SimpleNamespace(labels=lambda **kw: SimpleNamespace(inc=lambda n=1: None), inc=lambda n=1: None)


def _settler(pages: list) -> tuple[BadgeSettler, list]:
    settled: list = []

    async def dirty(client, n):
        return [MARK]

    async def wake_due(client, now, n):
        return None

    async def settle(shard, epoch, tenant, user, values, marks, wakes):
        settled.append(values)
        return 1, 1, True

    store = SimpleNamespace(clients=lambda: [object()], dirty=dirty, wake_due=wake_due, settle=settle,
                            dropped_marks=0)

    async def summarize(tenant, user, convs):
        pages.append(user)
        if len(pages) < 3:
            raise PageError("record missing at conversation_seq 1")
        return {c: SimpleNamespace(left_at=0, muted_until=0, mentioned=False, unread=1) for c in convs}

    return BadgeSettler(store, summarize, lambda t, u: (1, 1), _Metrics()), settled


async def test_a_failing_page_is_retried_after_a_growing_pause_then_settles(monkeypatch):
    clock = [100.0]  # the settler's monotonic clock, moved by hand
    monkeypatch.setattr(badge, "time", SimpleNamespace(time=time.time, monotonic=lambda: clock[0]))
    pages: list = []
    settler, settled = _settler(pages)
    for _ in range(10):  # ten rounds at once: one page asked, the user paused 1 s
        await settler.round()
    assert pages == [7]
    clock[0] += 1.0
    for _ in range(10):
        await settler.round()
    assert pages == [7, 7]  # failed again: paused 2 s
    clock[0] += 1.5
    await settler.round()
    assert pages == [7, 7] and settled == []
    clock[0] += 0.5
    assert await settler.round() == 1
    assert pages == [7, 7, 7] and settled == [{MARK.conversation_id: 1}]
    for _ in range(3):  # healed: no pause left for the user but the busy user's (test_settler_busy.py)
        clock[0] += badge.BUSY_SETTLE_S
        await settler.round()
    assert len(settled) == 4
