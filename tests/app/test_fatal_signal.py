"""A service process that dies of a fatal signal leaves its Python stack in its log
(qim/app/run.py `run_node`: faulthandler): a newcomer's mailbox died once with
"killed by signal 11 (SIGSEGV)" and nothing else to act on."""

from __future__ import annotations

import signal
import subprocess
import sys

# The node's build step raises SIGSEGV in the process itself, as a crash in a compiled
# extension would, from a named function so the trace can be checked for it.
PROGRAM = """
import os, signal
from qim.app.run import run_node

def build_that_crashes():
    os.kill(os.getpid(), signal.SIGSEGV)

run_node("fatal-test", build_that_crashes)
"""


def test_a_segfault_leaves_the_python_stack_on_stderr() -> None:
    proc = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "QIM_EVENT_LOOP": "asyncio"})
    assert proc.returncode == -signal.SIGSEGV, (proc.returncode, proc.stderr[-2000:])
    assert "Fatal Python error: Segmentation fault" in proc.stderr, proc.stderr[-2000:]
    assert "build_that_crashes" in proc.stderr, proc.stderr[-2000:]
