"""What a service process tells its supervisor about its health (docs/operations.md
"Supervision"; docs/decisions/0074-supervision-acts-on-health.md).

- Under systemd (`Type=notify` units with `WatchdogSec`, qim/dev/units.py) the node sends
  `READY=1` once its /healthz would first answer 200, then `WATCHDOG=1` every quarter of
  the unit's WatchdogSec (WATCHDOG_USEC) **only while healthy**: a process that stays
  unhealthy (503) or hangs for longer than WatchdogSec misses its pings and systemd
  kills and restarts it (`Restart=always`). `STATUS=` names the first reason against
  health while there is one (`systemctl status` shows it). Nothing is sent without
  $NOTIFY_SOCKET (the development supervisor polls /healthz instead: qim/dev/healthwatch.py).
- An engine away keeps the pings going (docs/decisions/0092-the-watchdog-waits-for-an-engine.md):
  while unhealthy the node probes its engines (qim/obs/engine_probe.py, in a thread); when
  Redis, every broker or every Cassandra node is away it still sends WATCHDOG=1, with
  `STATUS=waiting for an engine: ...`, because a restart cannot bring the engine back
  and would only drop every client on top of the outage. Once the engines answer, a node
  still unhealthy stops pinging and is restarted WatchdogSec later, as before.
- The sd_notify protocol is one datagram on a Unix socket (sd_notify(3)); it is written
  here rather than taken from a library because it is that small and the only
  maintained binding (systemd-python) needs libsystemd headers to build.
- With QIM_FAULT_INJECTION=1 (tests on loopback stacks only, qim/faults.py) the node
  also runs a probe task that dies when the stack's fault file names
  `task_dies:<this pid>`, so a test can see a process whose task died exit non-zero and
  be restarted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Callable, Iterable, Optional

from qim.faults import fault

logger = logging.getLogger(__name__)

PINGS_PER_PERIOD = 4  # WATCHDOG=1 every WatchdogSec / 4 while healthy
UNSUPERVISED_CHECK_S = 1.0  # how often health is looked at under Type=notify without WatchdogSec
FAULT_PROBE_S = 0.5


def sd_notify(state: str, address: Optional[str] = None) -> bool:
    """Send `state` ("READY=1", "WATCHDOG=1", "STATUS=...") to systemd's notify socket
    ($NOTIFY_SOCKET, or `address`); False when there is none or the send failed (logged)."""
    addr = address if address is not None else os.environ.get("NOTIFY_SOCKET", "")
    if not addr:
        return False
    if addr.startswith("@"):
        addr = "\0" + addr[1:]  # an abstract socket
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.setblocking(False)  # never stall the event loop on a full notify queue
            sock.sendto(state.encode(), addr)
        return True
    except OSError as exc:  # BlockingIOError too: this ping is lost, the next one comes

        logger.warning("sd_notify %s failed: %s", state.split("=")[0], exc)
        return False


def watchdog_period_s() -> Optional[float]:
    """The unit's WatchdogSec in seconds ($WATCHDOG_USEC), None without one."""
    raw = os.environ.get("WATCHDOG_USEC", "")
    pid = os.environ.get("WATCHDOG_PID", "")
    if not raw.isdigit() or int(raw) == 0 or (pid and pid != str(os.getpid())):
        return None
    return int(raw) / 1e6


async def notify_systemd(health: Callable[[], Iterable[str]],
                         away: Optional[Callable[[], Optional[str]]] = None) -> None:
    """READY=1 once healthy, then WATCHDOG=1 while healthy or while `away()` (blocking,
    run in a thread; None: never) names an engine that is away (module doc); runs until
    cancelled. `health()`: the reasons against health (none: healthy)."""
    period = watchdog_period_s()
    every = period / PINGS_PER_PERIOD if period else UNSUPERVISED_CHECK_S
    ready, status = False, ""
    while True:
        reasons = list(health())
        waiting = None
        if reasons and ready and period and away is not None:
            waiting = await asyncio.to_thread(away)
        if not reasons:
            if not ready:
                ready = sd_notify("READY=1")
            if period:
                sd_notify("WATCHDOG=1")
        elif waiting:  # not the node's fault: a restart cannot cure it (0092)
            sd_notify("WATCHDOG=1")
        if waiting:
            now = f"waiting for an engine: {waiting}; unhealthy: {reasons[0]}"
        else:
            now = f"unhealthy: {reasons[0]}" if reasons else "healthy"
        if now != status:
            sd_notify(f"STATUS={now}")
            status = now
        await asyncio.sleep(every)


async def fault_probe() -> None:
    """Tests only: die when the fault file names `task_dies:<pid>` (module doc)."""
    point = f"task_dies:{os.getpid()}"
    while True:
        await asyncio.sleep(FAULT_PROBE_S)
        fault(point)
