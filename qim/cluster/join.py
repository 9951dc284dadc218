"""Joining the ShardRegistry: taking a node's lease under its configured node id
(docs/design.md §13; docs/decisions/0040-scale-leases-and-fencing.md), before the
ShardKeeper (qim/cluster/keeper.py) renews it and places shards.

A holder that keeps renewing is another live process with the same id: JoinRefused, the
node does not start. A holder that does not renew for DETECT_RENEWALS renewal periods is
a dead predecessor (a crash, a restart faster than its lease): its lease is taken over
(the keeper then takes its shards, each under a new owner_epoch).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time

from qim.stores.registry import JoinRefused, JoinResult, ShardRegistry

logger = logging.getLogger(__name__)

DETECT_RENEWALS = 2.5  # a holder that does not renew for this many periods is presumed dead


def incarnation() -> str:
    """A token unique to this process start."""
    return f"{os.getpid()}-{secrets.token_hex(6)}"


async def take_node_lease(registry: ShardRegistry, kind: str, node_id: str, incarnation: str, ttl_ms: int,
                          renew_s: float, addr: str = "", extra: str = "") -> tuple[JoinResult, float]:
    """Take the node lease of `node_id` of `kind` for `incarnation` (module doc), each
    registry call bounded by one renewal period (`renew_s`, seconds). Returns the joined
    JoinResult and the monotonic time its call was sent (the lease runs from then).
    Raises JoinRefused naming the id when a live process holds it; StoreUnavailable /
    TimeoutError when the registry cannot be reached."""
    timeout = max(renew_s, 0.05)
    sent = time.monotonic()
    res = await asyncio.wait_for(registry.join(kind, node_id, incarnation, ttl_ms, addr, extra), timeout)
    first = time.monotonic()
    while not res.joined:
        seen = (res.holder, res.beat)
        await asyncio.sleep(max(renew_s / 4, 0.05))
        dead = time.monotonic() - first >= DETECT_RENEWALS * renew_s
        sent = time.monotonic()
        res = await asyncio.wait_for(registry.join(kind, node_id, incarnation, ttl_ms, addr, extra,
                                                   take_from=seen if dead else None), timeout)
        if not res.joined and (res.holder, res.beat) != seen:
            raise JoinRefused(f"{kind} node id {node_id!r} is in use by a live process (at "
                              f"{res.addr or 'an unknown address'}, renewing its lease); give this one "
                              "another node id")
        if res.joined and dead:
            logger.warning("%s node %s: took the id over from an incarnation that stopped renewing", kind, node_id)
    return res, sent
