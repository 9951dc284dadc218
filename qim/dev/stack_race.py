"""A port of the stack's plan taken by another process before its service bound it
(docs/decisions/0155).

Fresh ports are chosen free when the stack is laid out and bound by each service seconds
later; a parallel test's engine or stack may take one in between. The service then exits
("cannot listen ... in use"), or, worse, the other process answers the service's
/healthz with 200. Services say their pid in the X-Qim-Pid header of /healthz
(qim/obs/http.py), so an answer from a process outside the stack's directory is told
apart (PortTaken), and `stack_up` lays the stack out again with other fresh ports.
"""

from __future__ import annotations

from pathlib import Path

from qim.dev._proc import pid_alive, pid_cwd
from qim.errors import EngineError

# the stack is laid out again with other fresh ports this many times
PORT_RACE_RETRIES = 2


class PortTaken(EngineError):
    """A service's port answered for another process (wait_ready): the port was free
    when the stack was laid out and taken before the service bound it."""


def port_race(exc: EngineError) -> bool:
    """`exc` says a port of the plan was taken before its service bound it."""
    text = str(exc)
    return isinstance(exc, PortTaken) or ("cannot listen:" in text and "in use" in text)


def foreign_pid(header: str | None, stack_dir: Path) -> int:
    """The pid named by an X-Qim-Pid `header` when that process runs outside
    `stack_dir` (another process holds the port), else 0 (no header, not a number, gone,
    or a process of this stack)."""
    try:
        pid = int(header or 0)
    except ValueError:
        return 0
    if pid and pid_alive(pid) and pid_cwd(pid) != str(Path(stack_dir).resolve()):
        return pid
    return 0
