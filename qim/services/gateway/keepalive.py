"""Silent client connections are closed (docs/decisions/0077-silent-connections-reaped.md).

A device whose path stops forwarding (a NAT that forgot it, a proxy, a laptop that
slept) sends no FIN and no RST: without a deadline of its own the gateway would keep
its authenticated connection, count it online, hold its presence and charge it against
its user's connection cap for ever. The contract (docs/protocol.md "Heartbeat"): the
gateway tells `heartbeat_s` in AUTH_OK and PONG; a client sends a frame at least every
heartbeat_s / 2 (a PING when it has nothing else to send; both SDKs do).

- `Keepalive.run` sweeps the online connections every heartbeat_s / 4 and aborts each
  one from which nothing was read for SILENT_FACTOR × heartbeat_s (90 s at the default
  60 s) and that took none of its queued bytes meanwhile (a device the gateway stopped
  reading because it does not read its replies is alive while it drains them:
  ClientConnection.silent_s). The abort ends its connection task, which unregisters
  it from the online registry and marks the device offline in presence (conn.py).
  A sweep that wakes much later than planned (the process was starved or stopped)
  skips one round: the bytes that arrived meanwhile are read before anyone is judged.
- The kernel's part, for a peer that vanished while the gateway still writes or TCP
  itself is silent: TCP keepalive after heartbeat_s of idle and TCP_USER_TIMEOUT of
  SILENT_FACTOR × heartbeat_s for unacknowledged data, set once on the listening socket
  (accepted sockets inherit them; listener.py).
- At the per-user cap a connection silent for longer than EVICTABLE_FACTOR × heartbeat_s
  (two of the client's PING intervals missed) is closed to admit the new login
  (online.py): a user's live devices are never locked out by dead ones.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time

from qim.services.gateway.online import OnlineRegistry

logger = logging.getLogger(__name__)
SILENT_FACTOR = 1.5  # reaped after this many heartbeats of silence (three PING intervals of a client)
EVICTABLE_FACTOR = 1.0  # at the per-user cap: closed for a new login after this many (two PING intervals)


class Keepalive:
    """Sweeps `online` (OnlineRegistry) every `heartbeat_s` / 4 s; reaps connections
    silent for SILENT_FACTOR × `heartbeat_s` s. `reaped` counts them (a total)."""

    def __init__(self, online: OnlineRegistry, heartbeat_s: float) -> None:
        if heartbeat_s <= 0:
            raise ValueError("heartbeat_s must be > 0")
        self.online = online
        self.deadline_s = SILENT_FACTOR * heartbeat_s
        self.interval_s = max(0.25, heartbeat_s / 4)
        self.reaped = 0

    async def run(self) -> None:
        """Sweep until cancelled (a node task: server.py)."""
        planned = time.monotonic() + self.interval_s
        while True:
            await asyncio.sleep(max(0.0, planned - time.monotonic()))
            now = time.monotonic()
            late = now - planned > self.interval_s
            planned = now + self.interval_s
            if late:  # starved or stopped: let the reads of the stall be served first
                logger.info("keepalive sweep %.1f s late: skipped once", now - planned + self.interval_s)
                continue
            self.sweep(now)

    def sweep(self, now: float) -> int:
        """Reap every connection silent for longer than the deadline; how many."""
        reaped = 0
        for conn in self.online.connections():
            if conn.silent_s(now) > self.deadline_s:
                conn.reap("silent")
                reaped += 1
        self.reaped += reaped
        if reaped:
            logger.info("closed %d silent connection(s) (nothing read for %.0f s)", reaped, self.deadline_s)
        return reaped


def tcp_keepalive(sock: socket.socket, heartbeat_s: int) -> None:
    """TCP keepalive (probes after `heartbeat_s` idle, every heartbeat_s / 4) and
    TCP_USER_TIMEOUT (SILENT_FACTOR × heartbeat_s for unacknowledged data) on `sock`; on
    a listening socket the accepted ones inherit them. Options the platform lacks are
    skipped (macOS has no TCP_USER_TIMEOUT)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", heartbeat_s), ("TCP_KEEPINTVL", max(1, heartbeat_s // 4)),
                        ("TCP_KEEPCNT", 4), ("TCP_USER_TIMEOUT", int(SILENT_FACTOR * heartbeat_s * 1000))):
        option = getattr(socket, name, None)
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)
