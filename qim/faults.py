"""Fault injection for crash gates: a process killed at a named point of the commit,
fanout, mailbox or archive path must recover by itself (docs/design.md §5.2-§5.4).

Enabled only with QIM_FAULT_INJECTION=1 on loopback-only listeners (config refuses it
otherwise, so a production configuration cannot carry it). With a point set, the
process SIGKILLs itself when it reaches that point.
"""

from __future__ import annotations

import logging
import os
import signal

logger = logging.getLogger(__name__)

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
