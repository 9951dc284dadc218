"""A gateway whose node lease lapsed reconnects its devices (docs/decisions/0154).

While a gateway's node lease is lapsed (the process stalled or was paused past the
lease, or the registry was away that long) the rest of the cluster takes it for gone:
mailbox nodes withhold its devices' pushes (0153 wakes them when it is listed again),
session nodes drop its devices' READ_SYNC, SESSION_DELTA and conversation-state frames,
and nothing sends them again: a device that stayed connected through it would keep a
stale unread count and read marks until its next list pull, hours later. The one repair
that covers every frame kind, those of today and those added later, is the one every
client already does after a lost connection: reconnect, AUTH, pull, re-read the list.

So after the first renewal that follows a lapse (qim/cluster/keeper.py `on_lapsed`), the
gateway closes every connection it holds, each at a random moment of a spread window
(n / RESYNC_LOGINS_PER_S seconds, within RESYNC_SPREAD_S): the reconnects arrive as a
ramp the login queue admits, never as one burst, and each client reconnects with its
own jittered backoff (to this gateway or the next of its list). Counted in
qim_gateway_silent_closed{reason="lease_lapsed"}.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Callable, Iterable, Protocol

logger = logging.getLogger(__name__)

RESYNC_LOGINS_PER_S = 500.0  # the reconnect ramp: about half of one gateway's measured logins a second
RESYNC_SPREAD_S = (1.0, 120.0)  # the window's bounds, s


class Reapable(Protocol):
    """An online connection (online.py DeviceConn): `reap(reason)` closes it at once."""

    def reap(self, reason: str) -> None:
        """Close the connection at once and unregister it."""
        ...


def spread_s(n: int) -> float:
    """The window (s) over which `n` connections are closed: n / RESYNC_LOGINS_PER_S,
    within RESYNC_SPREAD_S."""
    low, high = RESYNC_SPREAD_S
    return min(high, max(low, n / RESYNC_LOGINS_PER_S))


def resync_all(connections: Callable[[], Iterable[Reapable]], lapsed_s: float) -> int:
    """Schedule the close of every connection `connections()` gives now, each at a random
    moment of `spread_s(n)` (module doc); returns n. Runs on the event loop (call_later)."""
    conns = list(connections())
    window = spread_s(len(conns))
    loop = asyncio.get_running_loop()
    for conn in conns:
        loop.call_later(random.uniform(0.0, window), _reap, conn)
    logger.warning("node lease lapsed for %.1f s: %d device connection(s) reconnect over %.0f s to resync "
                   "(what the cluster sent them meanwhile was dropped)", lapsed_s, len(conns), window)
    return len(conns)


def _reap(conn: Reapable) -> None:
    try:
        conn.reap("lease_lapsed")
    except Exception:  # one connection's close must not stop the others' (it may have ended already)
        logger.exception("closing a connection after the lease lapsed failed")
