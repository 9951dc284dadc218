"""MailboxNode: owns shards by static assignment, serves MAILBOX_PULL, pushes to gateways.

Push is best effort and off the shard path: PushBatch frames are queued to every
gateway's push listener; a gateway that is down or too slow loses the push (counted in
`qim_mailbox_push_dropped_total`) and its clients recover by PULL_MAILBOX.
"""

from __future__ import annotations

import asyncio
import logging

from google.protobuf.message import DecodeError
from prometheus_client import Counter
from redis.exceptions import RedisError

from qim.config import MailboxConfig
from qim.errors import ErrorCode, RequestError
from qim.faults import MAILBOX_POINTS, FaultPoints
from qim.infra.redis.client import connect
from qim.net.framed import StreamClosed, parse_addr
from qim.net.rpc import RpcClient, keep_connected, serve_rpc
from qim.obs.http import invariant_reasons, serve_http
from qim.proto.v1 import internal_pb2
from qim.protocol import Opcode
from qim.services.mailbox.materializer import DIRTY, MailboxMaterializer
from qim.services.mailbox.pull import MailboxPuller, entry_pb
from qim.services.mailbox.store import RedisMailboxStore
from qim.services.session.feed import ProjectionFeed

logger = logging.getLogger(__name__)

PUSH_SENT = Counter("qim_mailbox_push_batches", "PushBatch frames queued to gateways")
PUSH_DROPPED = Counter("qim_mailbox_push_dropped", "PushBatch frames dropped (gateway down or slow)")
PUSH_QUEUE_LIMIT = 8 * 1024 * 1024


class MailboxNode:
    """Wires the materializer, the puller and the push clients; `start()` serves."""

    def __init__(self, config: MailboxConfig) -> None:
        self.config = config
        self.redis = connect(config.common.redis_addr)
        self.store = RedisMailboxStore(self.redis)
        self.materializer = MailboxMaterializer(config.common.kafka_bootstrap, self.store, config.owned_shards(),
                                                self.push, FaultPoints(config.fault_point, MAILBOX_POINTS),
                                                config.dp_gc_safety_ms)
        self.puller = MailboxPuller(self.redis, self.store, self.materializer, config.common.shard_count)
        self._gateways = [RpcClient(a) for a in config.gateway_push_addrs]
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
        batch = internal_pb2.PushBatch(tenant_id=tenant.to_bytes(16, "big"))
        for user, events in items:
            target = batch.targets.add(user_id=user)
            for ev in events:
                target.entries.add().CopyFrom(entry_pb(seq, ev))
        body = batch.SerializeToString()
        for gw in self._gateways:
            try:
                if not gw.connected:
                    raise StreamClosed("not connected")
                gw.send_oneway(Opcode.PUSH_BATCH, body)
                PUSH_SENT.inc()
            except StreamClosed:
                PUSH_DROPPED.inc()
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
        self._tasks.append(loop.create_task(keep_connected(self._gateways)))
        self._tasks.append(loop.create_task(self._projection.keep_connected()))
        await serve_http(self.config.metrics_listen, self.not_ready)
        host, port = parse_addr(self.config.listen)
        await serve_rpc(host, port, self.handle, 1024)
        logger.info("mailbox node %d/%d listening on %s", self.config.node_index, self.config.node_count,
                    self.config.listen)
        return loop.create_task(self.materializer.run())
