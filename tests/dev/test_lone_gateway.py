"""A lone gateway (qim/dev/lone_gateway.py) never outlives the process that started it:
`make soak-malformed` stopped with SIGTERM (Python's default: no `finally` runs) left
its gateway listening before."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie of a parent that never waits counts as gone
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_sigterm_of_its_starter_stops_the_gateway(tmp_path):
    code = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from qim.dev.lone_gateway import lone_gateway
        gw = lone_gateway(Path({str(tmp_path / "gw")!r}))
        print(gw.proc.pid, gw.redis.pid, flush=True)
        time.sleep(600)
    """)
    starter = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        gateway_pid, redis_pid = map(int, starter.stdout.readline().split())
        assert alive(gateway_pid) and alive(redis_pid)
        starter.send_signal(signal.SIGTERM)
        starter.wait(10)
        deadline = time.monotonic() + 15
        while alive(gateway_pid) or alive(redis_pid):
            assert time.monotonic() < deadline, "the lone gateway outlived its starter"
            time.sleep(0.1)
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()
