"""What the two move-under-traffic tests share besides tests/e2e/instancegate.py: running
`qimctl redis move-shard` / `move-bucket` as an operator would."""

from __future__ import annotations

import os
import subprocess
import sys


def qimctl_move(st, command: str, flag: str, unit: int, target: str) -> subprocess.CompletedProcess:
    """`qimctl redis <command> <flag> <unit> --to <target>` against the stack `st`'s
    engines (their environment); the finished process, its output captured (180 s at
    the most: a TimeoutExpired fails the test)."""
    env = {**os.environ, **st.engines.env()}
    return subprocess.run([sys.executable, "-m", "qim.cli.qimctl", "redis", command, flag, str(unit),
                           "--to", target], env=env, capture_output=True, text=True, timeout=180)
