"""MailboxNode: owns shards by static assignment, serves MAILBOX_PULL, pushes to gateways.

Push is best effort and off the shard path. A push is a position, not a payload
(docs/decisions/0033): per materialized record one PushBatch position (its mailbox_seq,
its message_id and its recipients; split to stay far below the frame limit), never the
entries or their bodies, which the devices pull. The frames are queued to every
gateway's push link (qim/services/mailbox/pushlink.py):
a link that is down keeps a bounded backlog for its reconnect, and anything dropped
(counted in `qim_mailbox_push_dropped_total{reason}`) makes that gateway wake the
affected devices, which pull (docs/decisions/0012-push-link-repair.md).
"""

from __future__ import annotations

import logging
from typing import Any, Iterator, Sequence

from google.protobuf.message import DecodeError

from qim.config import MailboxConfig
from qim.consts import INTERNAL_RPC_INFLIGHT
from qim.errors import ErrorCode, RequestError
from qim.faults import MAILBOX_POINTS, FaultPoints
from qim.obs.logcontext import current
from qim.obs.node import ServiceNode
from qim.proto.v1 import internal_pb2
from qim.protocol import Opcode
from qim.services.mailbox.materializer import MailboxMaterializer
from qim.services.mailbox.metrics import MailboxMetrics
from qim.services.mailbox.projection import ProjectionFeed
from qim.services.mailbox.pull import MailboxPuller
from qim.services.mailbox.pushlink import PushLink
from qim.stores.open import open_stores
from qim.topology import GATEWAY, SESSION

logger = logging.getLogger(__name__)

# recipients per PushBatch frame: at most ~10 bytes each, ~160 KiB (the frame limit is 4 MiB)
PUSH_USERS_PER_FRAME = 16_384


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
        self.stores = open_stores(config.common.redis_addr, mailbox_retention_ms=config.retention_ms,
                                  tier=config.common.tier)  # trimmed records are read from the archive
        self.store = self.stores.mailboxes
        self.materializer = MailboxMaterializer(config.common.kafka_bootstrap, self.store, config.owned_shards(),
                                                self.push, FaultPoints(config.fault_point, MAILBOX_POINTS),
                                                config.dp_gc_safety_ms, self.metrics)
        self.puller = MailboxPuller(self.stores.messages, self.store, self.materializer, config.common.shard_count)
        tenant = config.common.tenant.to_bytes(16, "big")
        self.push_links = [PushLink(a, config.node_index, config.node_count, tenant, metrics=self.metrics,
                                    tls=self.internal_tls, expect_service=GATEWAY)
                           for a in config.peers[GATEWAY]]
        self.metrics.watch_push_links(self.push_links)
        self._projection = ProjectionFeed(config.peers[SESSION], self.metrics,  # low-latency path to sessions
                                          tls=self.internal_tls)
        self.always_zero(self.metrics.dirty)
        self.closing(self.stores.close, "stores")
        self.closing(self.materializer.close, "dispatch consumer")
        for link in self.push_links + self._projection.links:
            self.closing(link.close, f"{link.name} link {link.addr}")

    def not_ready(self) -> Iterator[str]:
        """Materializer not running or catching up; dirty shards."""
        if not self.materializer.running:
            yield "materializer not running"
        elif not self.materializer.caught_up():
            yield "catching up with the dispatch log"
        yield from self.materializer.dirty_reasons

    def push(self, tenant: int, seq: int, items: Any) -> None:
        """The position of one materialized record to every gateway (never awaits)."""
        users = [user for user, _ in items]
        message_id = next((ev.message_id for _, events in items for ev in events), b"")
        trace = current("trace")  # bound by the materializer for this record
        for body in push_bodies(tenant, seq, message_id, users, bytes.fromhex(trace)):
            for link in self.push_links:
                link.push(body)
        self._projection.send(tenant, items)

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
        """Position shards, link to gateways and session nodes, serve pulls, materialize."""
        await self.stores.ping()
        await self.materializer.start()
        for link in self.push_links + self._projection.links:
            self.spawn(link.run(), f"{link.name} link {link.addr}")
        await self.serve_rpc(self.config.listen, self.handle, INTERNAL_RPC_INFLIGHT, tls=self.internal_tls)
        logger.info("mailbox node %d/%d listening on %s", self.config.node_index, self.config.node_count,
                    self.config.listen)
        self.spawn(self.materializer.run(), "materializer")
        self.spawn(self.materializer.lag_loop(), "dispatch lag")


def push_bodies(tenant: int, seq: int, message_id: bytes, users: Sequence[int], trace_id: bytes = b"") -> list[bytes]:
    """Serialized PushBatch frames of one record's position: mailbox_seq `seq`, the
    record's `message_id` (16 bytes; the load generator's first sighting) and its
    recipients `users`, at most PUSH_USERS_PER_FRAME per frame. No entry and no body:
    a device pulls them (its cursor may already be there). `trace_id`: the message's, for
    the gateway's log lines."""
    tenant_id = tenant.to_bytes(16, "big")
    bodies = []
    for i in range(0, len(users), PUSH_USERS_PER_FRAME):
        batch = internal_pb2.PushBatch(tenant_id=tenant_id)
        batch.positions.add(mailbox_seq=seq, message_id=message_id, user_ids=users[i:i + PUSH_USERS_PER_FRAME],
                            trace_id=trace_id)
        bodies.append(batch.SerializeToString())
    return bodies
