"""OwnerTable: the shard owners and live nodes a router needs, read from the
ShardRegistry and cached (docs/design.md §13; docs/decisions/0040-scale-leases-and-fencing.md).

A gateway routes MAILBOX_PULL and SESSION_CALL to the owner of the user's shard, and a
MailboxNode sends its low-latency projections to the owner of the session shard, from
this table: refreshed every `refresh_s` and at once (at most every MIN_REFRESH_S) when a
caller found the cached owner wrong (it refused: not the owner, or could not be reached).
A stale table costs one refused call and one refresh, never a wrong answer: every owner
checks its own lease before serving.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Optional

from qim.errors import EngineError
from qim.stores.errors import StorageError
from qim.stores.registry import NodeInfo, Owner, ShardRegistry

logger = logging.getLogger(__name__)

MIN_REFRESH_S = 0.1
REFRESH_TIMEOUT_S = 2.0


class OwnerTable:
    """Owners of every shard of `kinds` ({kind: shard count}) and the live nodes of
    `node_kinds`. `owner(kind, shard)` and `nodes(kind)` never block."""

    def __init__(self, registry: ShardRegistry, kinds: dict[str, int], node_kinds: tuple[str, ...] = (),
                 refresh_s: float = 1.0) -> None:
        self._registry = registry
        self._kinds = dict(kinds)
        self._node_kinds = tuple(node_kinds)
        self.refresh_s = refresh_s
        self._owners: dict[str, list[Owner]] = {}
        self._nodes: dict[str, list[NodeInfo]] = {}
        self._at = 0.0  # monotonic time of the last refresh (started)
        self._loaded_at = 0.0
        self._lock = asyncio.Lock()
        self.error = ""

    @property
    def loaded(self) -> bool:
        """True once one refresh succeeded."""
        return self._loaded_at > 0

    def owner(self, kind: str, shard: int) -> Optional[Owner]:
        """The cached owner of (kind, shard) if its lease was live when read, else None."""
        owners = self._owners.get(kind)
        if not owners or shard >= len(owners):
            return None
        o = owners[shard]
        age_ms = (time.monotonic() - self._loaded_at) * 1000
        return o if o.live and o.addr and o.remaining_ms > age_ms else None

    def owners(self, kind: str) -> list[Owner]:
        """Every cached lease of the kind, as read (live or not)."""
        return list(self._owners.get(kind, []))

    def nodes(self, kind: str) -> list[NodeInfo]:
        """The cached live nodes of `kind` (a node kind given at construction)."""
        return list(self._nodes.get(kind, []))

    async def refresh(self, force: bool = False) -> bool:
        """Read the registry again (at most every MIN_REFRESH_S; without `force` only when
        older than `refresh_s`). False when the registry could not be read (logged once
        per distinct error; the cached table stays)."""
        async with self._lock:
            now = time.monotonic()
            if now - self._at < (MIN_REFRESH_S if force else self.refresh_s):
                return self.loaded
            self._at = now
            try:
                owners = {k: await asyncio.wait_for(self._registry.owners(k, n), REFRESH_TIMEOUT_S)
                          for k, n in self._kinds.items()}
                nodes = {k: await asyncio.wait_for(self._registry.nodes(k), REFRESH_TIMEOUT_S)
                         for k in self._node_kinds}
            except (StorageError, EngineError, asyncio.TimeoutError) as exc:
                reason = exc.__class__.__name__ + (f": {exc}" if str(exc) else "")
                if reason != self.error:
                    logger.warning("shard registry unreadable (%s); routing by the cached owners", reason)
                self.error = reason
                return False
            self._owners, self._nodes, self._loaded_at, self.error = owners, nodes, now, ""
            return True

    async def run(self) -> None:
        """Refresh every `refresh_s` until cancelled."""
        while True:
            await self.refresh()
            await asyncio.sleep(self.refresh_s)
