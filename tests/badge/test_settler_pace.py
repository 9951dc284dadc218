"""The settler pauses IDLE_S after every round, not only after an empty one, unless a
page of marks came back full (qim/services/session/badge.py): rounds back to back
summarized a busy user once per message (docs/perf.md "Round six: the session's CPU per
message"); a backlog is still read page after page at once."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from qim.services.session import badge
from qim.services.session.badge import IDLE_S, SETTLE_PAGE, BadgeSettler
from qim.stores.badges import Dirty


class _Metrics:
    def counter(self, *args, **kwargs):
        return SimpleNamespace(labels=lambda **kw: SimpleNamespace(inc=lambda n=1: None), inc=lambda n=1: None)


class _Stop(Exception):
    """Ends run() after the scripted pages (run() retries only EngineError)."""


def _marks(n: int) -> list[Dirty]:
    return [Dirty(0, 7 + i, b"\x02" * 16, f"0:{7 + i}:02", "1") for i in range(n)]


async def _run(pages: list[int], monkeypatch) -> tuple[list[str], list[int]]:
    """run() over `pages` (marks per round); the pauses and page sizes in order."""
    events: list[str] = []
    summarized: list[int] = []

    async def sleep(s):
        events.append(f"sleep {s}")

    async def dirty(client, n):
        if not pages:
            raise _Stop()
        events.append(f"page {pages[0]}")
        return _marks(pages.pop(0))

    async def wake_due(client, now, n):
        return 0

    async def settle(shard, epoch, tenant, user, values, marks, wakes):
        return 1, 1, False

    async def summarize(tenant, user, convs):
        summarized.append(user)
        return {c: SimpleNamespace(left_at=0, muted_until=0, mentioned=False, unread=1) for c in convs}

    store = SimpleNamespace(clients=lambda: [object()], dirty=dirty, wake_due=wake_due, settle=settle,
                            dropped_marks=0)
    monkeypatch.setattr(badge.asyncio, "sleep", sleep)
    monkeypatch.setattr(badge, "BUSY_SETTLE_S", 0.0)  # the pace alone (test_settler_busy.py: a busy user)
    with pytest.raises(_Stop):
        await BadgeSettler(store, summarize, lambda t, u: (1, 1), _Metrics()).run()
    return events, summarized


async def test_a_pause_after_every_round_that_settled_something(monkeypatch):
    events, summarized = await _run([1, 1, 0, 2], monkeypatch)
    assert events == ["page 1", f"sleep {IDLE_S}", "page 1", f"sleep {IDLE_S}", "page 0", f"sleep {IDLE_S}",
                      "page 2", f"sleep {IDLE_S}"]
    assert len(summarized) == 4


async def test_a_full_page_is_followed_by_the_next_at_once(monkeypatch):
    events, summarized = await _run([SETTLE_PAGE, SETTLE_PAGE, 3], monkeypatch)
    assert events == [f"page {SETTLE_PAGE}", f"page {SETTLE_PAGE}", "page 3", f"sleep {IDLE_S}"]
    assert len(summarized) == 2 * SETTLE_PAGE + 3
