"""SessionNode: the qim-session process (docs/design.md §2 SessionProjection, §6).

Wires the durable dispatch consumer, the low-latency Projection intake (one-way frames
on the RPC listener), the session list cache, the request service (SESSION_CALL from
gateways) and DEVICE_FRAMES (READ_SYNC, SESSION_DELTA) to the push listeners of the
gateways holding the user's other devices (the PresenceDirectory of the node's shards,
qim/cluster/presence.py; every gateway while a shard's presence is being read), one
qim/net/oneway.py link per live gateway of the registry, no backlog: the frames carry
absolute values and the next pull or delta repairs a lost one. /healthz is 503 while the durable projection is catching up
or failed closed (the reason is the body); MARK_READ keeps working meanwhile.

Session shards (docs/design.md §13; docs/decisions/0040-scale-leases-and-fencing.md) are
leased from the ShardRegistry by a ShardKeeper: a grant fences and binds the shard's
checkpoint and assigns its partition (DurableProjector.add_shard) and drops the cached
lists of its users; a loss stops it at once. A request for a user whose shard this node
does not hold is UNAVAILABLE (the gateway asks the registry again).
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Iterator, Optional

from qim._core import ids
from qim.cluster.keeper import ShardKeeper
from qim.cluster.links import GatewayLinks
from qim.cluster.metrics import ShardMetrics
from qim.cluster.owners import OwnerTable
from qim.cluster.parts import start_together
from qim.cluster.presence import PresenceFollower
from qim.config import SessionConfig
from qim.consts import INTERNAL_RPC_INFLIGHT
from qim.errors import ConfigError, ErrorCode, RequestError
from qim.net.oneway import PEER_QUEUE_LIMIT, SENT, OneWayLink
from qim.obs.node import ServiceNode
from qim.proto.v1 import internal_pb2, session_pb2
from qim.protocol import Opcode
from qim.services.session.badge import BadgeSettler
from qim.services.session.cache import SessionListCache
from qim.services.session.consumer import DurableProjector
from qim.services.session.feed import ProjectionIntake
from qim.services.session.firstreg import FirstRegistrations, restore_list
from qim.services.session.metrics import SessionMetrics
from qim.services.session.projected import Projected
from qim.services.session.register import Registration
from qim.services.session.service import SessionService
from qim.stores.open import RedisPlacement, open_badges, open_registry, open_stores
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
        self.stores = stores = open_stores(config.common.redis_layout, tier=config.common.tier)
        self.cache = SessionListCache(config.snapshot_ttl_ms / 1000)
        if config.registry is None:
            raise ConfigError("qim-session needs the ShardRegistry (QIM_REGISTRY_REDIS_ADDR / QIM_REDIS_ADDR)")
        reg = config.registry
        self.shard_registry = open_registry(reg.redis_addr)
        self.keeper = ShardKeeper(self.shard_registry, "session", reg.node_id, config.common.shard_count,
                                  reg.lease_ms, reg.renew_ms, addr=config.listen, on_acquire=self._acquire,
                                  on_release=self._release, metrics=ShardMetrics(self.registry))
        # a shard an operator is moving to another Redis instance is held by nobody (decision 0104)
        self.keeper.paused = RedisPlacement(self.stores, self.registry).moving_shards
        # what the low-latency path wrote, skipped by the durable one (decision 0167)
        self.projected = Projected()
        self.metrics.watch_projected(self.projected)
        self.projector = DurableProjector(config.common.kafka_bootstrap, stores.sessions, config.common.shard_count,
                                          self._marked, self.metrics, on_lost=self.keeper.refused,
                                          projected=self.projected)
        # a PROJECTION frame comes from the mailbox owner of the same shard: register all of it
        self.intake = ProjectionIntake(stores.sessions, lambda user: True, self._marked, metrics=self.metrics,
                                       projected=self.projected)
        tier = stores.archive_tier  # the archive tier: first registrations in CQL, lists rebuilt from them
        self.first_registrations = (FirstRegistrations(stores.sessions, tier.conversations, self.metrics)
                                    if tier is not None else None)
        restore = None if tier is None else partial(restore_list, sessions=stores.sessions,
                                                    conversations=tier.conversations, messages=stores.messages,
                                                    groups=stores.groups, metrics=self.metrics)
        self.sessions = SessionService(stores.messages, stores.groups, stores.sessions, stores.reads, self.cache,
                                       self._send_devices, self._unserved, self.metrics, restore, stores.convstates,
                                       stores.push)
        # UserBadgeState (badge.py, decision 0129): settled by the owner of the user's shard
        self.badges = open_badges(stores)
        self.sessions.badges = self.badges
        self.settler = BadgeSettler(self.badges, self.sessions.summarize, self._badge_owner, self.metrics,
                                    on_settled=self._badge_changed)
        self.peers = OwnerTable(self.shard_registry, {}, ("gateway",))
        self.gateways = GatewayLinks(self.peers, lambda gw, addr: OneWayLink(
            addr, Opcode.DEVICE_FRAMES, queue_limit=PEER_QUEUE_LIMIT, on_drop=self._frame_dropped,
            reconnect_max_s=GATEWAY_RECONNECT_MAX_S, name="device frames", tls=self.internal_tls,
            expect_service=GATEWAY), failures=self.link_failures)
        self.presence = PresenceFollower(config.common.kafka_bootstrap, "qim-session-presence", self.gateways.live,
                                         on_bad=self.metrics.presence_bad.inc)
        self.metrics.watch_cache(self.cache)
        self.closing(self.shard_registry.close, "shard registry")
        self.closing(stores.close, "stores")
        self.closing(self.projector.close, "dispatch consumer")
        self.closing(self.presence.close, "presence consumer")
        self.closing(self.gateways.close, "gateway links")
        self.closing(self.keeper.stop, "shard leases")  # first: stop serving, release, leave

    def _shard_of(self, tenant: int, user: int) -> int:
        return ids.user_placement(tenant, user, self.config.common.shard_count)[2]

    def _unserved(self, tenant: int, user: int, pages: bool) -> Optional[str]:
        shard = self._shard_of(tenant, user)
        if not self.keeper.holds(shard):
            return f"session shard {shard} is not served by this node (not its owner)"
        return self.projector.unserved(shard) if pages else None

    def _badge_owner(self, tenant: int, user: int) -> Optional[tuple[int, int]]:
        """(shard, owner_epoch) of the user's session shard when served here caught up."""
        shard = self._shard_of(tenant, user)
        epoch = self.projector.fences.get(shard)
        if epoch is None or not self.keeper.holds(shard) or self.projector.unserved(shard):
            return None
        return shard, epoch

    def _badge_changed(self, tenant: int, user: int, badge: int, version: int) -> None:
        """A new UserBadgeState: SESSION_DELTA with it to every device of the user."""
        delta = session_pb2.SessionDelta(badge=badge, badge_version=version).SerializeToString()
        self._send_devices(tenant, user, 0, Opcode.SESSION_DELTA, delta)

    async def _acquire(self, shard: int, owner_epoch: int) -> None:
        await start_together(self.projector.add_shard(shard, owner_epoch), self.presence.add_shard(shard))
        self.cache.forget(lambda key: self._shard_of(*key) == shard)

    async def _release(self, shard: int, reason: str) -> None:
        await self.projector.remove_shard(shard, reason)
        await self.presence.remove_shard(shard)

    def _marked(self, regs: list[Registration]) -> None:
        for r in regs:
            self.cache.mark((r.tenant, r.user), r.conversation_id.hex().encode())  # the convs member

    def _frame_dropped(self, reason: str) -> None:
        self.metrics.device_frames_dropped.inc()

    def _send_devices(self, tenant: int, user: int, exclude_device: int, opcode: int, body: bytes) -> None:
        frames = internal_pb2.DeviceFrames(tenant_id=tenant.to_bytes(16, "big"), user_id=user,
                                           exclude_device_id=exclude_device, opcode=opcode,
                                           body=body).SerializeToString()
        devices = self.presence.devices_of(self._shard_of(tenant, user), tenant, user)
        if devices is None:  # the shard's presence is being read: every gateway
            links = list(self.gateways)
        else:  # only the gateways holding one of the user's devices other than the excluded one
            links = [self.gateways.links[gw] for gw, held in devices.items()
                     if held - {exclude_device} and gw in self.gateways.links]
        for gw in links:
            if gw.send(frames) == SENT:
                self.metrics.device_frames.labels(opcode=f"0x{opcode:04x}").inc()

    def not_ready(self) -> Iterator[str]:
        """Not joined / leases ended; the durable projection's reason (catching up, failed closed)."""
        yield from self.keeper.not_ready()
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
        await self.keeper.join()  # JoinRefused (a ConfigError) when the node id is in use
        await self.projector.start()
        self.spawn(self.gateways.run(), "gateway links")
        self.spawn(self.presence.run(), "presence")
        self.spawn(self.intake.run(), "projection intake")
        self.spawn(self._sweep(), "cache sweep")
        if self.first_registrations is not None:
            self.spawn(self.first_registrations.run(), "first registrations")
        await self.serve_rpc(self.config.listen, self.handle, INTERNAL_RPC_INFLIGHT, on_oneway=self.on_oneway,
                             tls=self.internal_tls)
        logger.info("session node %s listening on %s", self.keeper.node_id, self.config.listen)
        self.spawn(self.projector.run(), "durable projection")
        self.spawn(self.projector.lag_loop(), "durable projection lag")
        self.spawn(self.keeper.run(), "shard leases")
        self.spawn(self.settler.run(), "badge settler")
