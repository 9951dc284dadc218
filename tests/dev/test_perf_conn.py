"""The `make perf` connection step (qim/dev/perf_conn.py) as an instrument: it refuses
what it cannot run with the reason, and a small run holds every connection it logged in
(each answers a PING) and reports the figures the perf line prints. No figure is
asserted against a goal here: speed is measured by `make perf`, never by a test."""

from __future__ import annotations

import resource

import pytest

from qim.dev import perf_conn


def test_more_connections_than_descriptors_is_refused_with_the_reason():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no finite descriptor limit to exceed")
    with pytest.raises(perf_conn.ConnStepError, match="file descriptors needed but the hard limit is"):
        perf_conn.raise_fd_limit(hard + 1)
    with pytest.raises(perf_conn.ConnStepError, match="more than the 500 warm-up"):
        perf_conn.run(perf_conn.WARMUP)


def test_a_small_step_holds_every_connection_and_prints_its_fields(tmp_path):
    figures = perf_conn.run(perf_conn.WARMUP + 100, base=tmp_path, report=lambda line: None)
    assert figures["failed"] == 0 and figures["errors"] == {}
    assert figures["connections"] == perf_conn.WARMUP + 100
    assert figures["alive"] == figures["pong"] == perf_conn.WARMUP + 100
    assert figures["conn_kb_per_idle"] > 0 and figures["gateway_cpu_us_per_login"] > 0
    line = perf_conn.conn_line(figures)
    assert line.startswith("conn_kb_per_idle=") and " logins_per_s=" in line
