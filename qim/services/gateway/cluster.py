"""The gateway's membership in the cluster (docs/design.md §13; docs/decisions/0040-scale-leases-and-fencing.md,
0042-scale-presence.md): its node lease in the ShardRegistry (liveness; `extra` = its push
address, which mailbox and session nodes dial), the cached owners of mailbox and session
shards (routing) with the live mailbox nodes (push-link readiness), the session epochs of
logins and the PresenceDirectory publisher. A gateway built without a registry (unit
tests of the client edge only) has none of them: mailbox and session requests are then
UNAVAILABLE.
"""

from __future__ import annotations

from typing import Awaitable, Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry

from qim.cluster.keeper import ShardKeeper
from qim.cluster.metrics import ShardMetrics
from qim.cluster.owners import OwnerTable
from qim.config import GatewayConfig
from qim.obs.node import ServiceNode
from qim.services.gateway.metrics import GatewayMetrics
from qim.services.gateway.presence import PresencePublisher, PresentDevice
from qim.stores.open import RedisPlacement, open_registry, open_stores
from qim.topology import GATEWAY, MAILBOX, SESSION


class GatewayCluster:
    """Registry, owners, node lease, session epochs and presence of one gateway node;
    `node` (the ServiceNode) gets the tasks and closers."""

    def __init__(self, config: GatewayConfig, metrics: GatewayMetrics, registry: CollectorRegistry) -> None:
        reg = config.registry
        assert reg is not None
        self.shard_registry = open_registry(reg.redis_addr)
        shards = config.common.shard_count
        self.owners = OwnerTable(self.shard_registry, {MAILBOX: shards, SESSION: shards}, (MAILBOX,))
        self.keeper = ShardKeeper(self.shard_registry, GATEWAY, reg.node_id, 0, reg.lease_ms, reg.renew_ms,
                                  addr=config.listen, extra=config.push_listen, metrics=ShardMetrics(registry))
        self.stores = open_stores(config.common.redis_layout)  # session epochs: one INCR per AUTH
        self.placement = RedisPlacement(self.stores, registry)  # where moved shards are (decision 0104)
        self.epochs = self.stores.epochs
        self.presence = PresencePublisher(config.common.kafka_bootstrap, reg.node_id, self.keeper.incarnation,
                                          reg.presence_ttl_ms, metrics)

    def mailbox_nodes(self) -> list[str]:
        """The live mailbox nodes (each must have linked its push path)."""
        return [n.node_id for n in self.owners.nodes(MAILBOX)]

    def not_ready(self) -> Iterator[str]:
        """Not joined; the registry not read yet."""
        yield from self.keeper.not_ready()
        if not self.owners.loaded:
            yield f"shard registry not read yet ({self.owners.error or 'starting'})"

    async def start(self, node: ServiceNode, connections: Callable[[], Iterable[PresentDevice]]) -> None:
        """Join (JoinRefused, a ConfigError, when the node id is in use), read the
        registry, then run the lease, the owner table and the presence renewal as tasks
        of `node`."""
        await self.placement.load()  # session epochs go where moved shards are
        await self.keeper.join()
        self.presence.since_ms = self.keeper.since_ms
        await self.owners.refresh(force=True)
        node.spawn(self.owners.run(), "shard owners")
        node.spawn(self.keeper.run(), "node lease")
        node.spawn(self.presence.renew(connections), "presence renewal")

    def closers(self) -> list[tuple[Callable[[], Awaitable[None]], str]]:
        """(close, what) in registration order (the node closes them in reverse)."""
        return [(self.shard_registry.close, "shard registry"), (self.stores.close, "stores"),
                (self.presence.close, "presence producer"), (self.keeper.stop, "node lease")]
