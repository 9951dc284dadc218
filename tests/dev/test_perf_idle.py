"""The idle window of `make perf` (qim/dev/perf.py Bench.idle): the whole window's CPU per
second per process, and the stack's total in each IDLE_WINDOW_S part (idle_windows),
so a cost still falling after the load shows as falling. No stack: the clock and the
CPU samples are stand-ins."""

from __future__ import annotations

import argparse

import pytest

from qim.dev import perf


class Clock:
    """time.monotonic and time.sleep of a clock that moves only when slept."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def bench(monkeypatch, cpu_ms_per_s) -> perf.Bench:
    """A Bench whose two processes burn `cpu_ms_per_s(t)` ms of CPU per second each at time t."""
    clock = Clock()
    monkeypatch.setattr(perf, "time", clock)
    b = perf.Bench(argparse.Namespace(out="/nonexistent"))
    used = {"kafka": 0.0, "writer": 0.0}
    last = [0.0]

    def sample(pids):
        while last[0] < clock.now:  # integrate the rate second by second
            for name in used:
                used[name] += cpu_ms_per_s(last[0]) / 1000.0
            last[0] += 1.0
        return dict(used)

    monkeypatch.setattr(b, "until_drained", lambda: None)
    monkeypatch.setattr(b, "pids", lambda: {"kafka": 1, "writer": 2})
    monkeypatch.setattr(b, "sample", sample)
    return b


def test_a_cost_that_decays_shows_in_the_windows(monkeypatch):
    b = bench(monkeypatch, lambda t: 40.0 if t < 10 else 10.0)
    out = b.idle(30)
    assert b.idle_windows == [80.0, 20.0, 20.0]  # two processes: the stack's total per part
    assert out == {"kafka": 20.0, "writer": 20.0}  # the whole window, per process


def test_a_window_not_a_multiple_of_the_part_ends_with_a_short_part(monkeypatch):
    b = bench(monkeypatch, lambda t: 5.0)
    assert b.idle(25) == {"kafka": 5.0, "writer": 5.0}
    assert b.idle_windows == [10.0, 10.0, 10.0]
    assert b.idle(0) is None


@pytest.mark.parametrize("seconds", [-1, 0])
def test_no_window_is_no_figure(monkeypatch, seconds):
    assert bench(monkeypatch, lambda t: 1.0).idle(seconds) is None
