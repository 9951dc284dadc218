"""Supervision of the development stack (docs/operations.md "Supervision"): a gateway
killed with SIGKILL is started again by the stack's supervisor and serves clients
within RESTART_WITHIN_S; `qim-dev stack status` counts the restart and the supervisor's
log names the exit status. Real engines and processes (the session's `ops_stack`)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time

from qim.dev._proc import pid_alive
from qim.dev.stack import Stack
from qim.dev.supervisor import BACKOFF_MAX_S, backoff_s, describe_exit
from qim.protocol import Opcode
from tests.e2e.rawclient import RawClient

# 0.5 s backoff, then a gateway start (TLS contexts, push links from the mailbox node):
# about 3 s on an idle 2-core machine; the bound leaves room for a loaded one
RESTART_WITHIN_S = 20.0


def test_backoff_doubles_and_is_bounded():
    assert [backoff_s(n) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert backoff_s(50) == BACKOFF_MAX_S


def test_exit_status_is_named():
    assert describe_exit(-9) == "killed by signal 9 (SIGKILL)"
    assert describe_exit(3) == "exit status 3"
    assert describe_exit(None) == "exit status unknown"


async def _serves(st) -> bool:
    try:
        client = await RawClient.login(st, 9_000_001, device=7)
        try:
            op, _ = await client.send_text(9_000_002, b"after the restart")
            return op == Opcode.SEND_ACK
        finally:
            await client.close()
    except (AssertionError, OSError, asyncio.TimeoutError):
        return False


async def test_a_killed_gateway_is_back_and_serving(ops_stack):
    st = ops_stack
    before = Stack.load(st.dir)
    assert before is not None and before.supervised()
    old, counted = before.pids["gateway"], before.restarts.get("gateway", 0)
    os.kill(old, signal.SIGKILL)
    t0 = time.monotonic()
    while True:
        now = Stack.load(st.dir)
        new = now.pids.get("gateway") if now is not None else None
        if new not in (None, old) and now.healthz("gateway")[0] == 200 and await _serves(st):
            break
        assert time.monotonic() - t0 < RESTART_WITHIN_S, "the gateway is not back and serving"
        await asyncio.sleep(0.2)
    assert not pid_alive(old)
    status = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "qim.dev.cli", "stack", "status", "--dir", str(st.dir)],
        capture_output=True, text=True, timeout=60)
    line = next(ln for ln in status.stdout.splitlines() if ln.startswith("gateway "))
    assert f"pid={new} " in line and f"restarts={counted + 1} " in line, status.stdout
    assert re.search(r"^supervisor pid=\d+ alive=True", status.stdout, re.M), status.stdout
    log = (st.dir / "logs" / "supervisor.log").read_text()
    assert f"gateway (pid {old}) killed by signal 9 (SIGKILL); restart {counted + 1} in 0.5s" in log
    assert "killed by signal 9 (SIGKILL)" in (st.dir / "logs" / "gateway.log").read_text()
