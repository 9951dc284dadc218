"""SessionNode: the qim-session process (DESIGN.md §2 SessionProjection, §6).

Wires the durable dispatch consumer, the low-latency Projection intake (oneway frames
on the RPC listener), the snapshot cache, the request service (SESSION_CALL from
gateways) and DEVICE_FRAMES to every gateway's push listener. /healthz is 503 while
the durable projection is catching up or failed closed (the reason is the body).
"""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import REGISTRY, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from redis.exceptions import RedisError

from qim.config import SessionConfig
from qim.errors import EngineError, ErrorCode, RequestError
from qim.infra.redis.checks import check_deployment
from qim.infra.redis.client import LuaScripts, connect
from qim.net.framed import StreamClosed, parse_addr
from qim.net.rpc import RpcClient, keep_connected, serve_rpc
from qim.obs.http import serve_http
from qim.proto.v1 import internal_pb2
from qim.protocol import Opcode
from qim.services.session.cache import SnapshotCache
from qim.services.session.consumer import CHECKPOINT_SCRIPT, DurableProjector
from qim.services.session.feed import FEED_QUEUE_LIMIT, ProjectionIntake
from qim.services.session.register import REGISTER_SCRIPT, Registrar, Registration
from qim.services.session.service import MARK_READ_SCRIPT, SessionService

logger = logging.getLogger(__name__)

FRAMES_SENT = Counter("qim_session_device_frames", "DEVICE_FRAMES queued to gateways", ["opcode"])
FRAMES_DROPPED = Counter("qim_session_device_frames_dropped", "DEVICE_FRAMES dropped (gateway down or slow)")
BAD_ONEWAY = Counter("qim_session_bad_oneway", "Unknown oneway frames on the session listener")
SWEEP_S = 30.0


class _CacheCollector:
    """Exports the cache's own counters (the cache stays free of metric objects)."""

    def __init__(self, cache: SnapshotCache) -> None:
        self._cache = cache

    def collect(self):
        c = CounterMetricFamily("qim_session_snapshot_events", "Snapshot cache events", labels=["event"])
        for event in ("rebuilt", "yielded", "refreshed", "abandoned"):
            c.add_metric([event], getattr(self._cache, event))
        yield c
        yield GaugeMetricFamily("qim_session_dirty_marks", "Dirty conversation marks held", self._cache.mark_count)


class SessionNode:
    """`start()` serves and returns the durable consumer's task."""

    def __init__(self, config: SessionConfig) -> None:
        self.config = config
        self.redis = connect(config.common.redis_addr)
        self.scripts = LuaScripts(self.redis, [REGISTER_SCRIPT, MARK_READ_SCRIPT, CHECKPOINT_SCRIPT])
        self.cache = SnapshotCache(config.snapshot_ttl_ms / 1000)
        registrar = Registrar(self.scripts)
        self.projector = DurableProjector(config.common.kafka_bootstrap, self.redis, self.scripts, registrar,
                                          config.common.shard_count, config.node_index, config.node_count,
                                          self._marked)
        self.intake = ProjectionIntake(registrar, self.projector.owns, self._marked)
        self.service = SessionService(self.redis, self.scripts, self.cache, self._send_devices,
                                      self.projector.not_ready)
        self._gateways = [RpcClient(a) for a in config.gateway_push_addrs]
        self._tasks: list[asyncio.Task] = []
        try:
            REGISTRY.register(_CacheCollector(self.cache))
        except ValueError:  # a second node in one process (tests): keep the first
            pass

    def _marked(self, regs: list[Registration]) -> None:
        for r in regs:
            self.cache.mark((r.tenant, r.user), r.conversation_id.hex().encode())  # the convs member

    def _send_devices(self, tenant: int, user: int, exclude_device: int, opcode: int, body: bytes) -> None:
        frames = internal_pb2.DeviceFrames(tenant_id=tenant.to_bytes(16, "big"), user_id=user,
                                           exclude_device_id=exclude_device, opcode=opcode,
                                           body=body).SerializeToString()
        for gw in self._gateways:
            try:
                if not gw.connected or gw.queued_bytes > FEED_QUEUE_LIMIT:
                    raise StreamClosed("gateway not connected or slow")
                gw.send_oneway(Opcode.DEVICE_FRAMES, frames)
                FRAMES_SENT.labels(opcode=f"0x{opcode:04x}").inc()
            except StreamClosed:
                FRAMES_DROPPED.inc()

    def not_ready(self):
        reason = self.projector.not_ready()
        if reason:
            yield reason

    async def handle(self, opcode: int, body: bytes) -> tuple[int, bytes]:
        if opcode != Opcode.SESSION_CALL:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, f"session does not serve opcode 0x{opcode:04x}")
        return await self.service.handle(body)

    async def on_oneway(self, opcode: int, body: bytes) -> None:
        if opcode == Opcode.PROJECTION:
            self.intake.offer(body)
        else:
            BAD_ONEWAY.inc()

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_S)
            self.cache.sweep()

    async def start(self) -> asyncio.Task:
        try:
            await check_deployment(self.redis, self.config.common.redis_addr, commit_facts=False,
                                   allow_unsafe_dev=self.config.common.allow_unsafe_dev)
        except RedisError as exc:
            raise EngineError(f"redis at {self.config.common.redis_addr} unreachable: {exc}") from exc
        await serve_http(self.config.metrics_listen, self.not_ready)
        await self.projector.start()
        loop = asyncio.get_running_loop()
        for coro in (keep_connected(self._gateways), self.intake.run(), self._sweep()):
            self._tasks.append(loop.create_task(coro))
        host, port = parse_addr(self.config.listen)
        await serve_rpc(host, port, self.handle, 1024, on_oneway=self.on_oneway)
        logger.info("session node %d/%d listening on %s", self.config.node_index, self.config.node_count,
                    self.config.listen)
        return loop.create_task(self.projector.run())
