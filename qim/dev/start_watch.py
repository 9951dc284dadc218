"""`qim-dev stack up`'s wait for a supervised stack (docs/operations.md "Supervision").

A service that dies while the stack starts (a one-off SIGSEGV, a port the kernel had
not let go yet) is the supervisor's to restart, exactly as after the start: `stack up`
waits for that restart instead of answering "exited during start" and stopping
everything. It reads stack.json afresh on every poll (the supervisor records the new
pid and the restart count there), says on the terminal what happened ("stack: mailbox
died during start (killed by signal 11 (SIGSEGV)); the supervisor restarted it, restart
1 of at most 3 while starting"), and gives the restarted service a fresh
READY_TIMEOUT_S. It gives up, with the service's last log lines, only when one service
was restarted more than START_RESTARTS_MAX times during the start (the backoff between
them is 0.5, 1, 2 s: a service that cannot start is refused within seconds), when one
is not healthy within its time, or when the supervisor itself stopped. So the whole
wait is bounded by (1 + START_RESTARTS_MAX) × READY_TIMEOUT_S.

A service that died because its port is in use by another process (the supervisor's
line says so: listen_failure) is refused at its first restart, with that reason: `stack
up` replaced every taken port before the start (decision 0150), so this is a race with
another process, which restarting on the same port does not win.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Callable

from qim.dev import progress
from qim.dev.stack import READY_TIMEOUT_S, Stack
from qim.errors import EngineError

START_RESTARTS_MAX = 3  # restarts of one service while `stack up` waits, before it gives up
POLL_S = 0.2
SUPERVISOR_MARK = "qim-dev supervisor: "  # how the supervisor's lines in a service's log begin
IN_USE = "its port is in use by another process"  # in the supervisor's line of such a death
# qim/app/run.py's exit-3 line for a listener's OSError: "qim-gateway: cannot start: cannot
# listen: [Errno 98] error while attempting to bind on address ('127.0.0.1', 7100): address
# already in use" (the same text from uvloop and asyncio)
_BIND_ADDR = re.compile(r"\('([^']+)', (\d+)\)")


def listen_failure(log_tail: str) -> str:
    """", its port is in use by another process (127.0.0.1:7100)" when the service's
    last run (its log lines after the supervisor's last line) ended on a listener whose
    address was in use; "" otherwise. What the supervisor adds to its line of the death."""
    for line in reversed(log_tail.splitlines()):
        if SUPERVISOR_MARK in line:
            return ""  # an earlier run's: this one said nothing about its listeners
        if "cannot listen:" in line and "in use" in line.lower():
            m = _BIND_ADDR.search(line)
            return f", {IN_USE} ({m.group(1)}:{m.group(2)})" if m else f", {IN_USE}"
    return ""


def death_words(stack: Stack, name: str) -> str:
    """How the service last died, from the supervisor's line in its log ("killed by
    signal 11 (SIGSEGV)", "exit status 1"); "it died" when the log has no such line."""
    for line in reversed(stack.log_tail(name, 200).splitlines()):
        if SUPERVISOR_MARK + name + " " in line:
            said = line.split(SUPERVISOR_MARK + name + " ", 1)[1].split(";", 1)[0]
            # "(pid 4242) killed by signal 11 (SIGSEGV)": the pid says nothing to a reader here
            return said.split(") ", 1)[1] if said.startswith("(pid ") and ") " in said else said
    return "it died"


def wait_supervised(
    dir: Path,
    supervisor_alive: Callable[[], bool],
    timeout: float = READY_TIMEOUT_S,
    max_restarts: int = START_RESTARTS_MAX,
) -> Stack:
    """Block until every service of the stack recorded in `dir` answers /healthz 200 and
    return that Stack (module doc for the rule). `supervisor_alive()` is polled too.

    Raises EngineError naming the service, with its last log lines: its port in use by
    another process (at its first restart), restarted more than `max_restarts` times, not healthy within `timeout` s of its (re)start, or the
    supervisor stopped (then with the supervisor log's tail)."""
    deadline = time.monotonic() + timeout
    seen: dict[str, int] = {}
    ready: set[str] = set()
    while True:
        stack = Stack.load(dir)
        if stack is None:
            raise EngineError(f"{dir / 'stack.json'} vanished while the stack started")
        if not supervisor_alive():
            log = dir / "logs" / "supervisor.log"
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:]) if log.exists() else "(no log)"
            raise EngineError(f"the stack's supervisor stopped while the stack started:\n{tail}")
        for name in stack.names:
            n = stack.restarts.get(name, 0)
            if n <= seen.get(name, 0):
                continue
            seen[name] = n
            ready.discard(name)
            if IN_USE in death_words(stack, name):
                raise EngineError(
                    f"{name} could not listen during start ({death_words(stack, name)}): another process "
                    f"took the port after `stack up` checked it; stop that process or run `stack up` again "
                    f"(it replaces a taken port); its last log lines:\n{stack.log_tail(name)}"
                )
            if n > max_restarts:
                raise EngineError(
                    f"{name} kept dying during start ({death_words(stack, name)}; "
                    f"{n} restarts by the supervisor); its last log lines:\n{stack.log_tail(name)}"
                )
            progress.note(
                f"{name} died during start ({death_words(stack, name)}); the supervisor "
                f"restarted it, restart {n} of at most {max_restarts} while starting"
            )
            deadline = max(deadline, time.monotonic() + timeout)  # the restarted one's own time
        for name in stack.names:
            if name in stack.pids and not stack.alive(name):
                ready.discard(name)  # died after its first 200: wait for its restart too
            if name in ready or name not in stack.pids or not stack.alive(name):
                continue  # not started yet, or dead with its restart pending: the supervisor's
            if stack.healthz(name)[0] == 200:
                ready.add(name)
                progress.note(f"{name} ready")
        if ready >= set(stack.names):
            return stack
        if time.monotonic() > deadline:
            late = [n for n in stack.names if n not in ready]
            status, body = stack.healthz(late[0])
            raise EngineError(
                f"{late[0]} not ready after {timeout:.0f}s ({status} {body.strip()}):\n{stack.log_tail(late[0])}"
            )
        time.sleep(POLL_S)
