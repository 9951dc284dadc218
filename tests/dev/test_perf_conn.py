"""The `make perf` connection step (qim/dev/perf_conn.py) as an instrument: it refuses
what it cannot run with the reason, and a small run holds every connection it logged in
(each answers a PING) and reports the figures the perf line prints. No figure is
asserted against a goal here: speed is measured by `make perf`, never by a test."""

from __future__ import annotations

import subprocess
import sys

import pytest

from qim.dev import perf_conn


def test_more_connections_than_descriptors_is_refused_with_the_reason():
    # in a child whose hard limit is made finite (1024), whatever this process's is
    code = ("import resource; resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024)); "
            "from qim.dev import perf_conn; perf_conn.raise_fd_limit(1025)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "1025 file descriptors needed but the hard limit is 1024" in r.stderr, r.stderr
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
