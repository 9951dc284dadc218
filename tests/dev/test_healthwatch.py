"""The supervisor's health rule (qim/dev/healthwatch.py): restart after `unhealthy_s` of
failing /healthz once the service had been healthy, or when it never became healthy
within the start grace; a 200 in between starts the count again. Pure (times given)."""

from __future__ import annotations

import pytest

from qim.dev.healthwatch import UNHEALTHY_RESTART_S, HealthWatch


def _watch(**kw) -> HealthWatch:
    w = HealthWatch(lambda n: (200, "ok"), lambda: [], **kw)
    w.started("writer")
    return w


def test_the_default_is_stated():
    assert UNHEALTHY_RESTART_S == 30.0
    with pytest.raises(ValueError):
        HealthWatch(lambda n: (200, ""), lambda: [], unhealthy_s=0)


def test_unhealthy_longer_than_the_limit_is_overdue_once():
    w = _watch(unhealthy_s=5, start_grace_s=60)
    w.observe("writer", 200, "ok", now=1000)
    w.observe("writer", 503, "no shards\nmore", now=1001)
    w.observe("writer", 503, "no shards", now=1005)
    assert w.overdue(now=1005.5) == []
    assert w.overdue(now=1006.5) == [("writer", "unhealthy for 5.5s (/healthz 503: no shards)")]
    assert w.overdue(now=1100) == []  # forgotten until started again


def test_a_200_between_failures_starts_the_count_again():
    w = _watch(unhealthy_s=5, start_grace_s=60)
    w.observe("writer", 200, "ok", now=1000)
    w.observe("writer", 0, "connection refused", now=1001)
    w.observe("writer", 200, "ok", now=1004)
    w.observe("writer", 503, "x", now=1005)
    assert w.overdue(now=1009) == []
    assert [n for n, _ in w.overdue(now=1010.5)] == ["writer"]


def test_never_healthy_within_the_start_grace():
    w = _watch(unhealthy_s=5, start_grace_s=60)
    t0 = w._started["writer"]
    w.observe("writer", 503, "starting", now=t0 + 1)
    assert w.overdue(now=t0 + 59) == []
    assert w.overdue(now=t0 + 61) == [("writer", "not healthy within 60s of its start (/healthz 503: starting); "
                                                 "the next start has 120s")]


def test_a_stopped_service_is_not_judged():
    w = _watch(unhealthy_s=5, start_grace_s=60)
    w.observe("writer", 200, "ok", now=1000)
    w.forget("writer")
    w.observe("writer", 0, "refused", now=1001)
    assert w.overdue(now=2000) == []


def test_an_engine_away_holds_both_clocks_and_back_gives_the_full_limit():
    # decision 0091: Redis away for longer than the limit restarts nobody
    w = _watch(unhealthy_s=5, start_grace_s=60)
    w.started("gateway")
    t0 = w._started["gateway"]
    w.observe("writer", 200, "ok", now=t0 + 1)
    w.observe("writer", 503, "redis unreachable", now=t0 + 2)
    for t in range(3, 200):  # an engine away for 197 s: past both the limit and the start grace
        w.engines_seen("redis 127.0.0.1:1: ConnectionRefusedError", now=t0 + t)
        assert w.overdue(now=t0 + t + 0.5) == []
    w.engines_seen(None, now=t0 + 200)
    assert w.overdue(now=t0 + 204) == []  # back: the full limit from the last poll that saw it away
    assert [n for n, _ in w.overdue(now=t0 + 205.5)] == ["writer"]
    assert w.overdue(now=t0 + 258) == []  # the start grace too counts from the engine's return
    assert [n for n, _ in w.overdue(now=t0 + 260.5)] == ["gateway"]


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf")])
def test_a_limit_that_is_not_a_positive_number_is_refused(bad):
    with pytest.raises(ValueError, match="unhealthy_s must be a number > 0"):
        HealthWatch(lambda n: (200, ""), lambda: [], unhealthy_s=bad)


@pytest.mark.parametrize("bad", ["0", "-5", "nan", "inf"])
def test_stack_up_refuses_a_limit_that_is_not_a_positive_number(bad, tmp_path):
    # before: nan passed `<= 0` and restarted a service at its first 503 (every comparison is False)
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "qim.dev.cli", "stack", "up", "--unhealthy-restart-s", bad,
                          "--dir", str(tmp_path / "stack")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out
    assert f"--unhealthy-restart-s must be a number of seconds > 0, got {float(bad)}" in out.stderr
    assert not (tmp_path / "stack" / "stack.json").exists()


def test_a_start_that_keeps_missing_the_grace_backs_off_and_a_200_resets_it():
    # decision 0091: a slow start is not cut off at the same grace for ever
    w = _watch(unhealthy_s=5, start_grace_s=60)
    graces = []
    for _ in range(5):
        w.started("writer")
        t0 = w._started["writer"]
        grace = w.grace_s("writer")
        assert w.overdue(now=t0 + grace - 1) == []
        (name, why), = w.overdue(now=t0 + grace + 1)
        assert why.startswith(f"not healthy within {grace:.0f}s of its start")
        graces.append(grace)
    assert graces == [60, 120, 240, 480, 480]  # doubled per miss in a row, at most 8 times
    w.started("writer")
    w.observe("writer", 200, "ok", now=w._started["writer"] + 1)
    assert w.grace_s("writer") == 60
