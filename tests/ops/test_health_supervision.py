"""A process that is alive but useless is restarted (issue 33 item 3; docs/operations.md
"Supervision"; docs/decisions/0074-supervision-acts-on-health.md).

Observed before the fix: a node whose long-lived task had died stayed up answering
/healthz 503 for minutes (3.5 and 15 minutes in the field) and the supervisor, which
only restarted processes that exited, did nothing.

Real engines and a supervised stack (the services are the supervisor's children, as
with `make up`) whose health limit is UNHEALTHY_S; the faults come from the stack's
fault file (qim/faults.py, QIM_FAULT_INJECTION=1):
- a background task of the fanout dies: the process stops and exits 5, the supervisor
  logs that status and starts it again, and the restart is counted;
- the writer is held at 503 while its process runs and answers: after UNHEALTHY_S the
  supervisor stops and restarts it, says why, and counts it.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from qim.app.run import EXIT_TASK_DIED
from qim.dev.stack import Stack
from qim.faults import FAULT_FILE
from tests.fixtures import start_private_stack

UNHEALTHY_S = 5.0
BACK_WITHIN_S = 90.0  # the limit, a stop, a backoff and a start on a loaded machine


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    st = start_private_stack(tmp_path_factory.mktemp("health"), supervise=True, unhealthy_restart_s=UNHEALTHY_S,
                             extra_env={"QIM_FAULT_INJECTION": "1"})
    try:
        yield st
    finally:
        st.down()
        st.engines.down()


def _back(st, name: str, old: int) -> Stack:
    """Wait until `name` runs under a new pid and answers 200; the stack as recorded then."""
    deadline = time.monotonic() + BACK_WITHIN_S
    while True:
        now = Stack.load(st.dir)
        pid = now.pids.get(name) if now is not None else None
        if pid not in (None, old) and now.healthz(name)[0] == 200:
            return now
        assert time.monotonic() < deadline, f"{name} not restarted and healthy within {BACK_WITHIN_S}s"
        time.sleep(0.3)


def _status_line(st, name: str) -> str:
    out = subprocess.run([sys.executable, "-m", "qim.dev.cli", "stack", "status", "--dir", str(st.dir)],
                         capture_output=True, text=True, timeout=60).stdout
    return next(ln for ln in out.splitlines() if ln.startswith(f"{name} "))


def test_a_task_that_dies_ends_the_process_and_the_supervisor_restarts_it(watched):
    st = watched
    before = Stack.load(st.dir)
    old, counted = before.pids["fanout"], before.restarts.get("fanout", 0)
    (st.dir / FAULT_FILE).write_text(f"task_dies:{old} 1 once\n")
    try:
        now = _back(st, "fanout", old)
    finally:
        (st.dir / FAULT_FILE).unlink()
    assert now.restarts.get("fanout", 0) == counted + 1
    assert f"restarts={counted + 1} " in _status_line(st, "fanout")
    log = (st.dir / "logs" / "supervisor.log").read_text()
    assert f"fanout (pid {old}) exit status {EXIT_TASK_DIED}; restart {counted + 1}" in log, log[-2000:]
    own = (st.dir / "logs" / "fanout.log").read_text()
    assert "task fault probe died: FaultInjected" in own
    assert "exiting so that the process is started again" in own


def test_a_service_stuck_at_503_is_restarted_after_the_stated_time(watched):
    st = watched
    before = Stack.load(st.dir)
    old, counted = before.pids["writer"], before.restarts.get("writer", 0)
    (st.dir / FAULT_FILE).write_text(f"unready:{old} 1 stuck\n")
    try:
        t0 = time.monotonic()
        deadline = t0 + 30
        while before.healthz("writer")[0] != 503:  # a live process answering 503
            assert time.monotonic() < deadline, before.healthz("writer")
            time.sleep(0.2)
        stuck_at = time.monotonic()
        now = _back(st, "writer", old)
    finally:
        (st.dir / FAULT_FILE).unlink()
    assert time.monotonic() - stuck_at >= UNHEALTHY_S  # not before the stated time
    assert now.restarts.get("writer", 0) == counted + 1
    assert f"restarts={counted + 1} " in _status_line(st, "writer")
    log = (st.dir / "logs" / "supervisor.log").read_text()
    assert f"writer (pid {old}) unhealthy for " in log and "held unready by the fault file" in log, log[-2000:]
    assert f"restart {counted + 1} in" in log
