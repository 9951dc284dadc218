"""ConnectionNode: client listener, push listener, /metrics and /healthz (DESIGN.md §2).

Ready once every live mailbox node of the ShardRegistry has linked its push path to
this gateway (qim/services/gateway/pushlink.py): until then a device could log in and
miss its pushes. Mailbox and session requests go to the owner of the user's shard, read
from the registry (qim/cluster/owners.py); the gateway holds a node lease of its own (its
liveness; a second gateway with the same node id refuses to start).

Transport security (issue 15, qim/net/tls.py): the client port is TLS 1.3 with ALPN
qim/1 (QIM_GATEWAY_TLS_*; the handshake counts toward QIM_AUTH_TIMEOUT_MS); the push
listener and the backend clients are mutual TLS with this process's service certificate
(QIM_INTERNAL_*); PUSH_BATCH is taken only from mailbox certificates, DEVICE_FRAMES only
from session certificates (qim/net/allow.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Iterator

from qim.cluster.keeper import ShardKeeper
from qim.cluster.metrics import ShardMetrics
from qim.cluster.owners import OwnerTable
from qim.config import GatewayConfig
from qim.errors import ConfigError
from qim.net.allow import MAILBOX, SESSION, WRITER
from qim.net.framed import FramedStream
from qim.net.tls import ALPN
from qim.obs.node import ServiceNode
from qim.services.gateway.auth import Authenticator
from qim.services.gateway.conn import CLIENT_CHUNK_BYTES, ClientConnection
from qim.services.gateway.metrics import GatewayMetrics
from qim.services.gateway.online import OnlineRegistry
from qim.services.gateway.presence import PresencePublisher
from qim.services.gateway.pushlink import PushListener
from qim.services.gateway.ratelimit import SendLimiter
from qim.services.gateway.router import BackendRouter
from qim.stores.open import open_registry, open_stores

logger = logging.getLogger(__name__)


class ConnectionNode(ServiceNode):
    """The qim-gateway process: `start()` opens /metrics, the push listener and the
    client listener (OSError when a port is taken); `stop()` closes them and every
    connection, then the backend clients."""

    service = "gateway"

    def __init__(self, config: GatewayConfig) -> None:
        super().__init__(config.metrics_listen)
        self.config = config
        self.metrics = GatewayMetrics(self.registry)
        self.online = OnlineRegistry(self.metrics, config.max_connections_per_user)
        self.auth = Authenticator(config, self.metrics)  # AUTH tokens (QIM_TOKEN_*)
        self.limiter = SendLimiter.from_config(config, self.metrics)  # QIM_RATE_*
        self.client_tls = self.tls_contexts(config.client_tls, "client port",
                                            "QIM_GATEWAY_TLS_CERT/QIM_GATEWAY_TLS_KEY", alpn=ALPN)
        self.internal_tls = self.tls_contexts(config.internal_tls, "internal", "QIM_INTERNAL_CA/TLS_CERT/TLS_KEY")
        if config.registry is None:
            raise ConfigError("qim-gateway needs the ShardRegistry (QIM_REGISTRY_REDIS_ADDR / QIM_REDIS_ADDR)")
        reg = config.registry
        self.shard_registry = open_registry(reg.redis_addr)
        shards = config.common.shard_count
        self.owners = OwnerTable(self.shard_registry, {"mailbox": shards, "session": shards}, ("mailbox",))
        self.keeper = ShardKeeper(self.shard_registry, "gateway", reg.node_id, 0, reg.lease_ms, reg.renew_ms,
                                  addr=config.listen, extra=config.push_listen, metrics=ShardMetrics(self.registry))
        self.router = BackendRouter(config.writer_addrs, self.owners, tls=self.internal_tls,
                                    services=(WRITER, MAILBOX, SESSION))
        # session epochs (one INCR per AUTH) and the PresenceDirectory (docs/decisions/0030)
        self.stores = open_stores(config.common.redis_addr)
        self.epochs = self.stores.epochs
        self.presence = PresencePublisher(config.common.kafka_bootstrap, reg.node_id, self.keeper.incarnation,
                                          reg.presence_ttl_ms, self.metrics)
        self.push = PushListener(self.online, lambda: [n.node_id for n in self.owners.nodes("mailbox")],
                                 self.metrics, guard=self.rpc_guard(enforce=self.internal_tls is not None))
        self.always_zero(self.metrics.backend_dropped)
        self.closing(self.shard_registry.close, "shard registry")
        self.closing(self.stores.close, "stores")
        self.closing(self.presence.close, "presence producer")
        self.closing(self.router.close, "backend clients")
        self.closing(self.keeper.stop, "node lease")

    def not_ready(self) -> Iterator[str]:
        """Not joined; the registry not read yet; no push link yet from some mailbox node."""
        yield from self.keeper.not_ready()
        if not self.owners.loaded:
            yield f"shard registry not read yet ({self.owners.error or 'starting'})"
        yield from self.push.not_ready()

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ClientConnection(FramedStream(reader, writer, chunk_bytes=CLIENT_CHUNK_BYTES), self)
        await conn.run()

    async def setup(self) -> None:
        """Join the registry, push listener first (mailbox nodes link while clients
        connect), then clients."""
        await self.keeper.join()  # JoinRefused (a ConfigError) when the node id is in use
        self.presence.since_ms = self.keeper.since_ms
        await self.owners.refresh(force=True)
        self.spawn(self.owners.run(), "shard owners")
        self.spawn(self.keeper.run(), "node lease")
        self.spawn(self.presence.renew(self.online.connections), "presence renewal")
        await self.listen(self.config.push_listen, self.push.on_connection, tls=self.internal_tls, name="push")
        await self.listen(self.config.listen, self._on_client, tls=self.client_tls, chunk_bytes=CLIENT_CHUNK_BYTES,
                          name="client", handshake_timeout=self.config.auth_timeout_s)
        logger.info("gateway listening on %s (push %s)", self.config.listen, self.config.push_listen)
