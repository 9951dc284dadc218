"""SessionNode: the qim-session process (docs/design.md §2 SessionProjection, §6).

Wires the durable dispatch consumer, the low-latency Projection intake (one-way frames
on the RPC listener), the session list cache, the request service (SESSION_CALL from
gateways) and DEVICE_FRAMES to every gateway's push listener (one qim/net/oneway.py
link per gateway, no backlog: the frames carry absolute values and the next pull or
delta repairs a lost one). /healthz is 503 while the durable projection is catching up
or failed closed (the reason is the body); MARK_READ keeps working meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Iterator

from qim.config import SessionConfig
from qim.consts import INTERNAL_RPC_INFLIGHT
from qim.errors import ErrorCode, RequestError
from qim.net.oneway import PEER_QUEUE_LIMIT, SENT, OneWayLink
from qim.obs.node import ServiceNode
from qim.proto.v1 import internal_pb2
from qim.protocol import Opcode
from qim.services.session.cache import SessionListCache
from qim.services.session.consumer import DurableProjector
from qim.services.session.feed import ProjectionIntake
from qim.services.session.firstreg import FirstRegistrations, restore_list
from qim.services.session.metrics import SessionMetrics
from qim.services.session.register import Registration
from qim.services.session.service import SessionService
from qim.stores.open import open_stores
from qim.topology import GATEWAY

logger = logging.getLogger(__name__)

SWEEP_S = 30.0
GATEWAY_RECONNECT_MAX_S = 0.5


class SessionNode(ServiceNode):
    """The qim-session process; its durable consumer runs as a supervised task."""

    service = "session"

    def __init__(self, config: SessionConfig) -> None:
        super().__init__(config.metrics_listen)
        self.config = config
        self.metrics = SessionMetrics(self.registry)
        # mutual TLS: serves SESSION_CALL (gateways) and PROJECTION (mailbox nodes), dials gateways
        self.internal_tls = self.tls_contexts(config.internal_tls, "internal", "QIM_INTERNAL_CA/TLS_CERT/TLS_KEY")
        self.stores = stores = open_stores(config.common.redis_addr, tier=config.common.tier)
        self.cache = SessionListCache(config.snapshot_ttl_ms / 1000)
        self.projector = DurableProjector(config.common.kafka_bootstrap, stores.sessions, config.common.shard_count,
                                          config.node_index, config.node_count, self._marked, self.metrics)
        self.intake = ProjectionIntake(stores.sessions, self.projector.owns, self._marked, metrics=self.metrics)
        tier = stores.archive_tier  # the archive tier: first registrations in CQL, lists rebuilt from them
        self.first_registrations = (FirstRegistrations(stores.sessions, tier.conversations, self.metrics)
                                    if tier is not None else None)
        restore = None if tier is None else partial(restore_list, sessions=stores.sessions,
                                                    conversations=tier.conversations, messages=stores.messages,
                                                    groups=stores.groups, metrics=self.metrics)
        self.sessions = SessionService(stores.messages, stores.groups, stores.sessions, stores.reads, self.cache,
                                       self._send_devices, self.projector.not_ready, self.metrics, restore)
        self._gateways = [OneWayLink(a, Opcode.DEVICE_FRAMES, queue_limit=PEER_QUEUE_LIMIT,
                                     on_drop=self._frame_dropped, reconnect_max_s=GATEWAY_RECONNECT_MAX_S,
                                     name="device frames", tls=self.internal_tls, expect_service=GATEWAY)
                          for a in config.peers[GATEWAY]]
        self.metrics.watch_cache(self.cache)
        self.closing(stores.close, "stores")
        self.closing(self.projector.close, "dispatch consumer")
        for link in self._gateways:
            self.closing(link.close, f"gateway link {link.addr}")

    def _marked(self, regs: list[Registration]) -> None:
        for r in regs:
            self.cache.mark((r.tenant, r.user), r.conversation_id.hex().encode())  # the convs member

    def _frame_dropped(self, reason: str) -> None:
        self.metrics.device_frames_dropped.inc()

    def _send_devices(self, tenant: int, user: int, exclude_device: int, opcode: int, body: bytes) -> None:
        frames = internal_pb2.DeviceFrames(tenant_id=tenant.to_bytes(16, "big"), user_id=user,
                                           exclude_device_id=exclude_device, opcode=opcode,
                                           body=body).SerializeToString()
        for gw in self._gateways:
            if gw.send(frames) == SENT:
                self.metrics.device_frames.labels(opcode=f"0x{opcode:04x}").inc()

    def not_ready(self) -> Iterator[str]:
        """The durable projection's reason (catching up, failed closed), if any."""
        reason = self.projector.not_ready()
        if reason:
            yield reason

    async def handle(self, opcode: int, body: bytes) -> tuple[int, bytes]:
        """SESSION_CALL from a gateway -> the SessionService's reply."""
        if opcode != Opcode.SESSION_CALL:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, f"session does not serve opcode 0x{opcode:04x}")
        return await self.sessions.handle(body)

    async def on_oneway(self, opcode: int, body: bytes) -> None:
        """PROJECTION frames from mailbox nodes; anything else is counted."""
        if opcode == Opcode.PROJECTION:
            self.intake.offer(body)
        else:
            self.metrics.bad_oneway.inc()

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_S)
            self.cache.sweep()

    async def setup(self) -> None:
        """Check the stores, position the durable consumer, then serve (EngineError when
        the stores are unreachable or unsafe: StoreUnavailable is one)."""
        await self.stores.check(commit_facts=False, allow_unsafe_dev=self.config.common.allow_unsafe_dev)
        await self.projector.start()
        for link in self._gateways:
            self.spawn(link.run(), f"gateway link {link.addr}")
        self.spawn(self.intake.run(), "projection intake")
        self.spawn(self._sweep(), "cache sweep")
        if self.first_registrations is not None:
            self.spawn(self.first_registrations.run(), "first registrations")
        await self.serve_rpc(self.config.listen, self.handle, INTERNAL_RPC_INFLIGHT, on_oneway=self.on_oneway,
                             tls=self.internal_tls)
        logger.info("session node %d/%d listening on %s", self.config.node_index, self.config.node_count,
                    self.config.listen)
        self.spawn(self.projector.run(), "durable projection")
        self.spawn(self.projector.lag_loop(), "durable projection lag")
