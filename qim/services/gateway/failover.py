"""Failover between the nodes of a rendezvous backend (the writers) in the gateway
(docs/operations.md "Recovery at a glance": the gateway tries the next writer and clients
see UNAVAILABLE only when none answers; docs/decisions/0079-writer-failover.md).

A node that is unreachable, does not answer within ATTEMPT_TIMEOUT_S (a paused or
starved process keeps its TCP connection: only a deadline tells) or refuses as unfit
(RemoteUnfit) is tried last for DEMOTE_S seconds, renewed by each further failure, so
the requests after the first do not each wait for it; its conversations meanwhile go to
the next node of their rendezvous order (affinity only: any writer commits any
conversation, a send seen by two commits once). The first failure of an episode is
logged at WARNING, its end (the node answered again) with the number of requests that
went elsewhere; every failed attempt counts in `qim_gateway_failovers_total{backend,
reason}`.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Optional, Sequence

logger = logging.getLogger(__name__)

# A node with another one after it in the order gets this long (a commit takes
# milliseconds; a loaded CI host's slowest seconds stay below it), the last one the
# RpcClient's whole call timeout.
ATTEMPT_TIMEOUT_S = 3.0
CALL_TIMEOUT_S = 10.0
# How long a failed node is tried last (each further failure renews it).
DEMOTE_S = 5.0


class Failover:
    """The failover state of one rendezvous backend `backend` over `addrs` (module doc).
    `count(backend, reason)` is called for every failed attempt (reason: "timeout",
    "unreachable", "unfit")."""

    def __init__(self, backend: str, addrs: Sequence[str],
                 count: Optional[Callable[[str, str], None]] = None) -> None:
        self.backend = backend
        self._addrs = tuple(addrs)
        self._count = count or (lambda backend, reason: None)
        self._until = [0.0] * len(self._addrs)  # time.monotonic() until which node i goes last
        self._episode = [0] * len(self._addrs)  # failed attempts of node i since its episode began

    def order(self, ranked: Sequence[int]) -> list[int]:
        """`ranked` (rendezvous order of node indexes) with the demoted nodes moved last,
        each group keeping its rendezvous order."""
        now = time.monotonic()
        return ([i for i in ranked if self._until[i] <= now] +
                [i for i in ranked if self._until[i] > now])

    def failed(self, i: int, reason: str, why: str) -> None:
        """Node `i` did not serve a request (`why`: the error's message, no request data)."""
        if self._episode[i] == 0:
            logger.warning("%s %s failed (%s: %s); its requests go to the next %s for %.0fs and until it answers",
                           self.backend, self._addrs[i], reason, why, self.backend, DEMOTE_S)
        self._episode[i] += 1
        self._until[i] = time.monotonic() + DEMOTE_S
        self._count(self.backend, reason)

    def answered(self, i: int) -> None:
        """Node `i` answered a request: its episode (if any) ends."""
        if self._episode[i]:
            logger.warning("%s %s answers again after %d failed attempt(s)", self.backend, self._addrs[i],
                           self._episode[i])
            self._episode[i] = 0
            self._until[i] = 0.0

    def demoted(self, i: int) -> bool:
        """Whether node `i` is tried last now."""
        return self._until[i] > time.monotonic()
