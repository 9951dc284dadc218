"""GatewayLinks: one one-way link per live gateway of the ShardRegistry (docs/design.md §13;
docs/decisions/0042-scale-presence.md).

Mailbox and session nodes no longer dial a configured list of gateways: every gateway
holds a node lease whose `extra` is its push address, and a node keeps one link (made by
`make(node_id, addr)`, run as a supervised task by `spawn`) to each gateway the registry
lists. A gateway that joins is linked within one refresh of the OwnerTable; a link to a
gateway whose lease ended keeps retrying with its bounded backlog (the gateway may come
back under its id); a gateway that came back on another push address gets a new link.
A gateway listed again under the same address after one refresh did not list it (its
lease lapsed while its process and its devices' connections lived on: a stall, a pause)
goes to `on_back(link)`: what was sent for its devices meanwhile was withheld from it
(presence counts only listed gateways), and nothing else tells them (decision 0153).
The links run as tasks of this object. A link's own loop survives any error of one
connection (qim/net/oneway.py); should its task still end, `run()` logs it, counts it
(`qim_link_failures_total{link, error="task_died: <class>"}`) and starts it again: one
link's failure never stops the links to the other gateways, and never ends this task
(docs/decisions/0073-links-survive-any-error.md).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Iterator, Optional

from qim.cluster.owners import OwnerTable

logger = logging.getLogger(__name__)


class GatewayLinks:
    """Links by gateway node id; `links` is read by the push paths (never blocks)."""

    def __init__(self, owners: OwnerTable, make: Callable[[str, str], Any], refresh_s: float = 0.5,
                 failures: Any = None, on_back: Optional[Callable[[Any], None]] = None) -> None:
        self._owners = owners
        self._on_back = on_back  # module doc: a lapsed gateway listed again
        self._lapsed: set[str] = set()  # linked gateways the last sync did not list
        self._make = make
        self._failures = failures  # qim_link_failures_total{link, error} (a labelled Counter), or None
        self._refresh_s = refresh_s
        self.links: dict[str, Any] = {}
        self._tasks: dict[str, Any] = {}
        self._retired: list[Any] = []
        self._refresh_error = ""

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self.links.values()))

    def live(self) -> dict[str, int]:
        """Live gateway node id -> when its current incarnation joined (registry ms): a
        presence entry counts when it names that one or a later one."""
        return {n.node_id: n.since_ms for n in self._owners.nodes("gateway")}

    def sync(self) -> None:
        """Make a link for every listed gateway without one (or whose address moved);
        `on_back(link)` for a linked one listed again after a sync that did not list it."""
        listed = set()
        for node in self._owners.nodes("gateway"):
            addr = node.extra
            if not addr:
                continue
            listed.add(node.node_id)
            old = self.links.get(node.node_id)
            if old is not None and old.addr == addr:
                if node.node_id in self._lapsed and self._on_back is not None:
                    logger.info("gateway %s listed again after its lease lapsed", node.node_id)
                    self._on_back(old)
                continue
            if old is not None:
                task = self._tasks.pop(node.node_id, None)
                if task is not None:
                    task.cancel()
                self._retired.append(old)
            link = self.links[node.node_id] = self._make(node.node_id, addr)
            if self._failures is not None:
                link.failures = self._failures
            self._start(node.node_id, link)
            logger.info("linked to gateway %s at %s", node.node_id, addr)
        self._lapsed = set(self.links) - listed

    def _start(self, node_id: str, link: Any) -> None:
        self._tasks[node_id] = asyncio.get_running_loop().create_task(link.run(), name=f"{link.name} link {node_id}")

    def revive(self) -> int:
        """Start again every link task that ended (module doc); returns how many."""
        revived = 0
        for node_id, task in list(self._tasks.items()):
            if not task.done():
                continue
            link = self.links[node_id]
            exc = None if task.cancelled() else task.exception()
            error = f"task_died: {type(exc).__name__}" if exc is not None else "task_ended"
            logger.error("%s link to gateway %s ended (%s), starting it again", link.name, node_id, error,
                         exc_info=exc)
            if self._failures is not None:
                self._failures.labels(link=link.name, error=error).inc()
            self._start(node_id, link)
            revived += 1
        return revived

    async def run(self) -> None:
        """Keep the links in step with the registry until cancelled, starting again any
        link task that ended. A failed registry refresh is logged and tried again at the
        next refresh (the links keep running meanwhile)."""
        try:
            while True:
                try:
                    await self._owners.refresh()
                    self.sync()
                    self._refresh_error = ""
                except Exception as exc:  # noqa: BLE001 — the links run on; the next refresh retries
                    why = f"{type(exc).__name__}: {exc}"
                    if why != self._refresh_error:  # once per distinct error, not every refresh
                        logger.warning("gateway list not refreshed: %s", why)
                    self._refresh_error = why
                self.revive()
                await asyncio.sleep(self._refresh_s)
        finally:
            for task in self._tasks.values():
                task.cancel()
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    async def close(self) -> None:
        """Close every link (current and replaced)."""
        for link in list(self.links.values()) + self._retired:
            await link.close()
