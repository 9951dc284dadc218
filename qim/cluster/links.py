"""GatewayLinks: one one-way link per live gateway of the ShardRegistry (docs/design.md §13;
docs/decisions/0042-scale-presence.md).

Mailbox and session nodes no longer dial a configured list of gateways: every gateway
holds a node lease whose `extra` is its push address, and a node keeps one link (made by
`make(node_id, addr)`, run as a supervised task by `spawn`) to each gateway the registry
lists. A gateway that joins is linked within one refresh of the OwnerTable; a link to a
gateway whose lease ended keeps retrying with its bounded backlog (the gateway may come
back under its id); a gateway that came back on another push address gets a new link.
The links run as tasks of this object; `run()` (a supervised task of the node) raises
when one of them died, so a broken link is never silent.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Iterator

from qim.cluster.owners import OwnerTable

logger = logging.getLogger(__name__)


class GatewayLinks:
    """Links by gateway node id; `links` is read by the push paths (never blocks)."""

    def __init__(self, owners: OwnerTable, make: Callable[[str, str], Any], refresh_s: float = 0.5) -> None:
        self._owners = owners
        self._make = make
        self._refresh_s = refresh_s
        self.links: dict[str, Any] = {}
        self._tasks: dict[str, Any] = {}
        self._retired: list[Any] = []

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self.links.values()))

    def live(self) -> dict[str, int]:
        """Live gateway node id -> when its current incarnation joined (registry ms): a
        presence entry counts when it names that one or a later one."""
        return {n.node_id: n.since_ms for n in self._owners.nodes("gateway")}

    def sync(self) -> None:
        """Make a link for every listed gateway without one (or whose address moved)."""
        for node in self._owners.nodes("gateway"):
            addr = node.extra
            if not addr:
                continue
            old = self.links.get(node.node_id)
            if old is not None and old.addr == addr:
                continue
            if old is not None:
                task = self._tasks.pop(node.node_id, None)
                if task is not None:
                    task.cancel()
                self._retired.append(old)
            link = self.links[node.node_id] = self._make(node.node_id, addr)
            self._tasks[node.node_id] = asyncio.get_running_loop().create_task(
                link.run(), name=f"{link.name} link {node.node_id}")
            logger.info("linked to gateway %s at %s", node.node_id, addr)

    async def run(self) -> None:
        """Keep the links in step with the registry until cancelled; raises the error of a
        link task that died."""
        try:
            while True:
                await self._owners.refresh()
                self.sync()
                for node_id, task in list(self._tasks.items()):
                    if task.done() and not task.cancelled() and task.exception() is not None:
                        raise RuntimeError(f"link to gateway {node_id} died") from task.exception()
                await asyncio.sleep(self._refresh_s)
        finally:
            for task in self._tasks.values():
                task.cancel()
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    async def close(self) -> None:
        """Close every link (current and replaced)."""
        for link in list(self.links.values()) + self._retired:
            await link.close()
