"""MailboxNode: owns shards by static assignment, serves MAILBOX_PULL, pushes to gateways.

Push is best effort and off the shard path: PushBatch frames (split to stay far below
the frame limit) are queued to every gateway's push link (qim/services/mailbox/pushlink.py):
a link that is down keeps a bounded backlog for its reconnect, and anything dropped
(counted in `qim_mailbox_push_dropped_total{reason}`) makes that gateway wake the
affected devices, which pull (docs/decisions/0012-push-link-repair.md).
"""

from __future__ import annotations

import asyncio
import logging

from google.protobuf.message import DecodeError
from redis.exceptions import RedisError

from qim.config import MailboxConfig
from qim.errors import ErrorCode, RequestError
from qim.faults import MAILBOX_POINTS, FaultPoints
from qim.infra.redis.client import connect
from qim.net.framed import parse_addr
from qim.net.rpc import serve_rpc
from qim.obs.http import invariant_reasons, serve_http
from qim.proto.v1 import internal_pb2
from qim.protocol import Opcode
from qim.services.mailbox.materializer import DIRTY, MailboxMaterializer
from qim.services.mailbox.pull import MailboxPuller, entry_pb
from qim.services.mailbox.pushlink import PushLink
from qim.services.mailbox.store import RedisMailboxStore
from qim.services.session.feed import ProjectionFeed

logger = logging.getLogger(__name__)

PUSH_BATCH_MAX_BYTES = 256 * 1024  # one PushBatch frame (the frame limit is 4 MiB)


class MailboxNode:
    """Wires the materializer, the puller and the push clients; `start()` serves."""

    def __init__(self, config: MailboxConfig) -> None:
        self.config = config
        self.redis = connect(config.common.redis_addr)
        self.store = RedisMailboxStore(self.redis, config.retention_ms)
        self.materializer = MailboxMaterializer(config.common.kafka_bootstrap, self.store, config.owned_shards(),
                                                self.push, FaultPoints(config.fault_point, MAILBOX_POINTS),
                                                config.dp_gc_safety_ms)
        self.puller = MailboxPuller(self.redis, self.store, self.materializer, config.common.shard_count)
        tenant = config.common.tenant.to_bytes(16, "big")
        self.push_links = [PushLink(a, config.node_index, config.node_count, tenant)
                           for a in config.gateway_push_addrs]
        self._projection = ProjectionFeed(config.session_addrs)  # low-latency path to SessionProjection
        self._tasks: list[asyncio.Task] = []

    def not_ready(self):
        if not self.materializer.running:
            yield "materializer not running"
        elif not self.materializer.caught_up():
            yield "catching up with the dispatch log"
        yield from self.materializer.dirty_reasons
        yield from invariant_reasons([DIRTY])

    def push(self, tenant: int, seq: int, items) -> None:
        """PushBatch of one materialized record to every gateway (never awaits)."""
        for body in push_bodies(tenant, seq, items):
            for link in self.push_links:
                link.push(body)
        self._projection.send(tenant, items)

    async def handle(self, opcode: int, body: bytes) -> tuple[int, bytes]:
        if opcode != Opcode.MAILBOX_PULL:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, f"mailbox does not serve opcode 0x{opcode:04x}")
        try:
            req = internal_pb2.MailboxPull.FromString(body)
        except DecodeError:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "bad MailboxPull") from None
        try:
            batch = await self.puller.pull(req)
        except RedisError as exc:
            raise RequestError(ErrorCode.UNAVAILABLE, "mailbox store unavailable") from exc
        return Opcode.MAILBOX_BATCH, batch.SerializeToString()

    async def start(self) -> asyncio.Task:
        """Position shards, start listeners; returns the materializer task."""
        await self.redis.ping()
        await self.materializer.start()
        loop = asyncio.get_running_loop()
        self._tasks += [loop.create_task(link.run()) for link in self.push_links]
        self._tasks.append(loop.create_task(self._projection.keep_connected()))
        await serve_http(self.config.metrics_listen, self.not_ready)
        host, port = parse_addr(self.config.listen)
        await serve_rpc(host, port, self.handle, 1024)
        logger.info("mailbox node %d/%d listening on %s", self.config.node_index, self.config.node_count,
                    self.config.listen)
        return loop.create_task(self.materializer.run())


def push_bodies(tenant: int, seq: int, items) -> list[bytes]:
    """Serialized PushBatch frames for one record's [(user, events)], each at most about
    PUSH_BATCH_MAX_BYTES (a single target is never split: its entries are one event
    group, at most 8 events of at most 8 KiB inline body each)."""
    tenant_id = tenant.to_bytes(16, "big")
    bodies = []
    batch = internal_pb2.PushBatch(tenant_id=tenant_id)
    size = 0
    for user, events in items:
        target = internal_pb2.PushBatch.Target(user_id=user, entries=[entry_pb(seq, ev) for ev in events])
        target_size = target.ByteSize() + 6  # + field tag and length prefix
        if batch.targets and size + target_size > PUSH_BATCH_MAX_BYTES:
            bodies.append(batch.SerializeToString())
            batch = internal_pb2.PushBatch(tenant_id=tenant_id)
            size = 0
        batch.targets.append(target)
        size += target_size
    if batch.targets:
        bodies.append(batch.SerializeToString())
    return bodies
