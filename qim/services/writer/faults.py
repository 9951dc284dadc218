"""Fault injection for the writer crash gates (issue 4; DESIGN.md §5.2).

Enabled only with QIM_FAULT_INJECTION=1 on a loopback-only writer (config refuses it
otherwise). With a point set, reserve and record run as two calls, and the process
SIGKILLs itself when it reaches the point: after_reserve, after_record, after_outbox,
after_commit (after COMMITTED, before the SendAck leaves).
"""

from __future__ import annotations

import logging
import os
import signal

logger = logging.getLogger(__name__)

POINTS = ("after_reserve", "after_record", "after_outbox", "after_commit")


class FaultPoints:
    """`hit(name)` kills the process when `name` is the configured point."""

    def __init__(self, point: str = "") -> None:
        if point and point not in POINTS:
            raise ValueError(f"unknown fault point {point!r}; expected one of {', '.join(POINTS)}")
        self.point = point

    @property
    def split_reserve(self) -> bool:
        return bool(self.point)

    def hit(self, name: str) -> None:
        if name == self.point:
            logger.warning("fault injection: SIGKILL at %s", name)
            os.kill(os.getpid(), signal.SIGKILL)
