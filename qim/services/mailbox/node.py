"""MailboxNode: owns shards leased from the ShardRegistry, serves MAILBOX_PULL, pushes to gateways.

Shards (docs/design.md §13; docs/decisions/0040-scale-leases-and-fencing.md): a ShardKeeper
holds this node's leases; each grant is fenced in the shard's watermark and served from
min(W)+1 (MailboxMaterializer.add_shard), each loss stops the shard at once; a pull for
a shard this node does not hold (or whose lease ended) is UNAVAILABLE, and the gateway
asks the registry again. A shard taken over wakes its online devices on every gateway
(its previous owner may have died between a finish and its push).

Push is best effort and off the shard path. A push is a position (docs/decisions/0033):
per materialized record one PushBatch position (its mailbox_seq, its message_id and its
recipients; split to stay far below the frame limit); a small direct record's position
also carries each recipient user's entries and previous position (inline.py,
docs/decisions/0156), which a device whose cursor is there applies without a pull;
everything else the devices pull. The frames are queued to the push link
of each gateway holding a recipient's device (qim/services/mailbox/targets.py: the
PresenceDirectory of the node's shards; a link per live gateway of the registry,
qim/services/mailbox/pushlink.py): a link that is down keeps a bounded backlog for its
reconnect, and anything dropped (counted in `qim_mailbox_push_dropped_total{reason}`)
makes that gateway wake the affected devices, which pull
(docs/decisions/0012-push-link-repair.md).
"""

from __future__ import annotations

import logging
from typing import Iterator, Optional

from google.protobuf.message import DecodeError

from qim._core import ids
from qim._core.types import MailboxEvent
from qim.cluster.keeper import ShardKeeper
from qim.cluster.metrics import ShardMetrics
from qim.cluster.owners import OwnerTable
from qim.cluster.parts import start_together
from qim.config import MailboxConfig
from qim.consts import INTERNAL_RPC_INFLIGHT, MAILBOX_BULK_TURNS, MAILBOX_GLOBAL_PERMIT, MAILBOX_REDIS_TURNS
from qim.errors import ConfigError, ErrorCode, RequestError
from qim.faults import MAILBOX_POINTS, FaultPoints
from qim.obs.node import ServiceNode
from qim.proto.v1 import internal_pb2
from qim.protocol import Opcode
from qim.services.mailbox.inline import Inline
from qim.services.mailbox.materializer import MailboxMaterializer
from qim.services.mailbox.metrics import MailboxMetrics
from qim.services.mailbox.projection import ProjectionFeed
from qim.services.mailbox.pull import MailboxPuller
from qim.services.mailbox.targets import PushTargets
from qim.stores.open import RedisPlacement, open_reactions, open_registry, open_stores

logger = logging.getLogger(__name__)



class MailboxNode(ServiceNode):
    """Wires the materializer, the puller and the push links; the materializer runs as
    a supervised task (a stopped or dirty materializer leaves the node up, unhealthy)."""

    service = "mailbox"

    def __init__(self, config: MailboxConfig) -> None:
        super().__init__(config.metrics_listen)
        self.config = config
        self.metrics = MailboxMetrics(self.registry)
        # mutual TLS: serves MAILBOX_PULL to gateways, dials gateways and session nodes
        self.internal_tls = self.tls_contexts(config.internal_tls, "internal", "QIM_INTERNAL_CA/TLS_CERT/TLS_KEY")
        self.stores = open_stores(config.common.redis_layout, mailbox_retention_ms=config.retention_ms,
                                  tier=config.common.tier)  # trimmed records are read from the archive
        self.store = self.stores.mailboxes
        if config.registry is None:
            raise ConfigError("qim-mailbox needs the ShardRegistry (QIM_REGISTRY_REDIS_ADDR / QIM_REDIS_ADDR)")
        reg = config.registry
        self.shard_registry = open_registry(reg.redis_addr)
        shard_count = config.common.shard_count
        self.keeper = ShardKeeper(self.shard_registry, "mailbox", reg.node_id, shard_count, reg.lease_ms,
                                  reg.renew_ms, addr=config.listen, on_acquire=self._acquire,
                                  on_release=self._release, metrics=ShardMetrics(self.registry))
        # a shard an operator is moving to another Redis instance is held by nobody (decision 0104)
        self.keeper.paused = RedisPlacement(self.stores, self.registry).moving_shards
        redis = config.common.tier.mailbox_store == "redis"
        self.materializer = MailboxMaterializer(config.common.kafka_bootstrap, self.store, [], self.push,
                                                FaultPoints(config.fault_point, MAILBOX_POINTS),
                                                config.dp_gc_safety_ms, self.metrics, on_lost=self.keeper.refused,
                                                # lanes advance apart only on Redis (decisions/0142, 0102)
                                                overtake=config.overtake and redis,
                                                # Redis runs one call at a time: 4 bulk turns keep it busy, 8 in
                                                # all keep its queue short; Cassandra's calls gain from
                                                # concurrency (decisions 0148, 0165)
                                                bulk_turns=MAILBOX_BULK_TURNS if redis else MAILBOX_GLOBAL_PERMIT,
                                                turns=MAILBOX_REDIS_TURNS if redis else MAILBOX_GLOBAL_PERMIT)
        self.puller = MailboxPuller(self.stores.messages, self.store, self.materializer, shard_count,
                                    holds=self.keeper.holds, reactions=open_reactions(self.stores))
        tenant = config.common.tenant.to_bytes(16, "big")
        # session owners (projections) and live gateways (push links, presence), from the registry
        self.peers = OwnerTable(self.shard_registry, {"session": shard_count}, ("gateway",))
        self.targets = PushTargets(config.common.kafka_bootstrap, reg.node_id,
                                   lambda: sorted(self.materializer.shards), self.peers, tenant, self.metrics,
                                   self.internal_tls, link_failures=self.link_failures)
        self._projection = ProjectionFeed(self.peers, self.spawn, self.metrics,  # low-latency path
                                          tls=self.internal_tls, link_failures=self.link_failures)
        self.always_zero(self.metrics.dirty)
        self.closing(self.shard_registry.close, "shard registry")
        self.closing(self.stores.close, "stores")
        self.closing(self.materializer.close, "dispatch consumer")
        self.closing(self.targets.close, "push links and presence")
        self.closing(self._close_projection_links, "projection links")
        self.closing(self.keeper.stop, "shard leases")  # first: stop serving, release, leave

    async def _close_projection_links(self) -> None:
        for link in list(self._projection.links.values()):
            await link.close()

    async def _acquire(self, shard: int, owner_epoch: int) -> None:
        await start_together(self.materializer.add_shard(shard, owner_epoch), self.targets.add_shard(shard))

    async def _release(self, shard: int, reason: str) -> None:
        await self.materializer.remove_shard(shard, reason)
        await self.targets.remove_shard(shard)

    def not_ready(self) -> Iterator[str]:
        """Not joined / leases ended; materializer not running or catching up; dirty shards."""
        yield from self.keeper.not_ready()
        if not self.materializer.running:
            yield "materializer not running"
        elif not self.materializer.caught_up():
            yield "catching up with the dispatch log"
        yield from self.materializer.dirty_reasons

    def push(self, tenant: int, seq: int, recipients: tuple, event: MailboxEvent, trace_id: bytes = b"",
             inline: Optional[Inline] = None) -> None:
        """PushBatch of one materialized record to the gateways holding its recipients'
        devices, PROJECTION to the owner of its session shard (never awaits). `event`:
        the recipients' event (its message's coordinates); `trace_id`: its message's
        (16 bytes, b"" when untraced), carried by both for their log lines; `inline`:
        what the push carries whole per user (decisions/0156)."""
        if not recipients:
            return
        # every recipient of a record is in its shard: the first one names it
        shard = ids.user_placement(tenant, recipients[0], self.config.common.shard_count)[2]
        self.targets.push(shard, tenant, seq, recipients, event.message_id, trace_id, inline)
        self._projection.send(shard, tenant, recipients, event, trace_id, seq)

    async def handle(self, opcode: int, body: bytes) -> tuple[int, bytes]:
        """MAILBOX_PULL from a gateway -> MAILBOX_BATCH (RequestError otherwise)."""
        if opcode != Opcode.MAILBOX_PULL:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, f"mailbox does not serve opcode 0x{opcode:04x}")
        try:
            req = internal_pb2.MailboxPull.FromString(body)
        except DecodeError:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "bad MailboxPull") from None
        batch = await self.puller.pull(req)  # a store outage is StoreUnavailable (UNAVAILABLE)
        return Opcode.MAILBOX_BATCH, batch.SerializeToString()

    async def setup(self) -> None:
        """Check the stores (EngineError when unreachable or unsafe, and with
        QIM_MAILBOX_STORE=cql when a mailbox table is missing or old: as the session node
        does), join the registry (JoinRefused: the node id is in use), link to gateways,
        serve pulls, materialize; the keeper then takes this node's shards."""
        await self.stores.check(commit_facts=False, allow_unsafe_dev=self.config.common.allow_unsafe_dev)
        await self.keeper.join()
        await self.materializer.start()
        self.spawn(self.targets.gateways.run(), "gateway links")
        self.spawn(self.targets.presence.run(), "presence")
        await self.serve_rpc(self.config.listen, self.handle, INTERNAL_RPC_INFLIGHT, tls=self.internal_tls)
        logger.info("mailbox node %s listening on %s", self.keeper.node_id, self.config.listen)
        self.spawn(self.materializer.run(), "materializer")
        self.spawn(self.materializer.lag_loop(), "dispatch lag")

        self.spawn(self.keeper.run(), "shard leases")
