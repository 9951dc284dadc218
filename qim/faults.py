"""Fault injection for crash gates: a process killed at a named point of the commit,
fanout, mailbox or archive path must recover by itself (docs/design.md §5.2-§5.4).

Enabled only with QIM_FAULT_INJECTION=1 on loopback-only listeners (config refuses it
otherwise, so a production configuration cannot carry it). With a point set, the
process SIGKILLs itself when it reaches that point.

Raised faults (`fault(point)`, docs/decisions/0073-links-survive-any-error.md): with
QIM_FAULT_INJECTION=1, each line `POINT COUNT TAG` of the file FAULT_FILE in the
process's working directory (while it exists; a test writes it into the stack's
directory) makes the next COUNT calls of `fault(POINT)` in this process raise
FaultInjected, a RuntimeError like uvloop's "unable to perform operation on
<TCPTransport closed=True>" inside a connect to a peer that just died; a new TAG starts
a new round. The file is looked for only with the flag set; the points are on reconnect
paths, never per message.
"""

from __future__ import annotations

import logging
import os
import signal

logger = logging.getLogger(__name__)

FAULT_FILE = "qim-test-faults"
_raised: dict[tuple[str, str], int] = {}  # (point, tag) -> faults raised in this process

# Writer (docs/design.md §5.2): with a point set, reserve and record run as two calls.
WRITER_POINTS = ("after_reserve", "after_record", "after_outbox", "after_commit")
# Mailbox (docs/design.md §5.4): after every entry is appended, before finish_dispatch.
MAILBOX_POINTS = ("after_append",)
# Fanout (docs/design.md §5.3): after the dispatches of a batch are durable, before the commit.
FANOUT_POINTS = ("after_dispatch",)
# HistoryArchiver (docs/decisions/0023): after a batch's rows are written, before its position moves.
ARCHIVER_POINTS = ("after_write",)


class FaultPoints:
    """`hit(name)` kills the process when `name` is the configured point."""

    def __init__(self, point: str = "", allowed: tuple[str, ...] = WRITER_POINTS) -> None:
        if point and point not in allowed:
            raise ValueError(f"unknown fault point {point!r}; expected one of {', '.join(allowed)}")
        self.point = point

    @property
    def active(self) -> bool:
        """True when a fault point is configured."""
        return bool(self.point)

    def hit(self, name: str) -> None:
        """SIGKILL this process when `name` is the configured point (a crash gate)."""
        if name == self.point:
            logger.warning("fault injection: SIGKILL at %s", name)
            os.kill(os.getpid(), signal.SIGKILL)


class FaultInjected(RuntimeError):
    """A failure raised at a fault point (module doc; the message names the point)."""


def enabled() -> bool:
    """QIM_FAULT_INJECTION=1 in this process's environment."""
    return os.environ.get("QIM_FAULT_INJECTION") == "1"


def _lines() -> list[str]:
    if not enabled():
        return []
    try:
        with open(FAULT_FILE) as f:
            return f.read().splitlines()
    except OSError:
        return []  # no file (yet, or any more): no fault


def listed(point: str) -> bool:
    """True while the fault file names `point` (a state rather than a count: a readiness
    held down for a test, qim/obs/node.py)."""
    return any(line.rsplit(None, 2)[0] == point for line in _lines() if len(line.rsplit(None, 2)) == 3)


def fault(point: str) -> None:
    """Raise FaultInjected when the fault file asks for one more at `point` (module doc)."""
    for line in _lines():
        parts = line.rsplit(None, 2)
        if len(parts) != 3 or parts[0] != point or not parts[1].isdigit():
            continue
        key = (point, parts[2])
        if _raised.get(key, 0) < int(parts[1]):
            _raised[key] = _raised.get(key, 0) + 1
            raise FaultInjected(f"unable to perform operation on <TCPTransport closed=True> "
                                f"(injected at {point} by {FAULT_FILE})")
