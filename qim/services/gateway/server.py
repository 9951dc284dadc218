"""ConnectionNode: client listener, push listener, /metrics and /healthz (docs/design.md §2).

Ready once every live mailbox node of the ShardRegistry has linked its push path to
this gateway (qim/services/gateway/pushlink.py): until then a device could log in and
miss its pushes. Mailbox and session requests go to the owner of the user's shard, read
from the registry (qim/cluster/owners.py); the gateway holds a node lease of its own (its
liveness; a second gateway with the same node id refuses to start).

Transport security (qim/net/tls.py, docs/decisions/0022): the client port is TLS 1.3 with ALPN
qim/1 (raw frames) or http/1.1 (WebSocket on /qim/ws: ws.py; docs/decisions/0030), one
FrameTransport per connection chosen by `transports` (QIM_GATEWAY_TLS_*; the handshake
counts toward QIM_AUTH_TIMEOUT_MS). Its connections are ClientLinks, not asyncio streams
(listener.py, qim/net/link.py; docs/decisions/0050: what an idle connection costs); the push
listener and the backend clients are mutual TLS with this process's service certificate
(QIM_INTERNAL_*); PUSH_BATCH is taken only from mailbox certificates, DEVICE_FRAMES only
from session certificates (the service table, qim/topology.py; checked by qim/net/allow.py).
"""

from __future__ import annotations

import logging
from typing import Awaitable, Callable, Iterator, Optional

from qim.config import GatewayConfig
from qim.net.framed import FramedStream
from qim.net.link import ClientLink
from qim.net.tls import ALPN, ALPN_HTTP, selected_alpn
from qim.net.transport import ByteReader, ByteWriter, FrameTransport
from qim.obs.node import ServiceNode
from qim.services.gateway.auth import Authenticator
from qim.services.gateway.cluster import GatewayCluster
from qim.services.gateway.conn import CLIENT_CHUNK_BYTES, ClientConnection
from qim.services.gateway.keepalive import EVICTABLE_FACTOR, Keepalive
from qim.services.gateway.lapse import resync_all
from qim.services.gateway.listener import ClientListener
from qim.services.gateway.login import LoginAdmission
from qim.services.gateway.metrics import GatewayMetrics
from qim.services.gateway.online import OnlineRegistry
from qim.services.gateway.pushlink import PushListener
from qim.services.gateway.ratelimit import SendLimiter
from qim.services.gateway.revocation import Revocations
from qim.services.gateway.router import BackendRouter
from qim.services.gateway.routes import build_locals
from qim.services.gateway.ws import WebSocketUpgrade
from qim.stores.revocations import open_revocations
from qim.topology import gateway_backends

logger = logging.getLogger(__name__)
# makes the FrameTransport of one accepted (and TLS-upgraded) connection, None when refused
ClientTransport = Callable[[ByteReader, ByteWriter], Awaitable[Optional[FrameTransport]]]


class ConnectionNode(ServiceNode):
    """The qim-gateway process: `start()` opens /metrics, the push listener and the
    client listener (OSError when a port is taken); `stop()` closes them and every
    connection, then the backend clients."""

    service = "gateway"

    def __init__(self, config: GatewayConfig) -> None:
        super().__init__(config.metrics_listen)
        self.config = config
        self.metrics = GatewayMetrics(self.registry)
        # silent connections reaped, at the cap evicted; logins admitted (decisions 0077, 0078)
        self.online = OnlineRegistry(self.metrics, config.max_connections_per_user,
                                     evict_after_s=EVICTABLE_FACTOR * config.heartbeat_s)
        self.keepalive = Keepalive(self.online, config.heartbeat_s)
        self.logins = LoginAdmission(config.logins_inflight, config.login_queue, self.metrics)
        self.auth = Authenticator(config, self.metrics)  # AUTH tokens (QIM_TOKEN_*, keys.py)
        # revocations on every core Redis instance (decision 0100), checked at AUTH and followed live
        # (a unit test's stand-in configuration has no Redis: no revocations then)
        self.revocation_store = open_revocations(config.common.redis_layout) if config.common.redis_addr else None
        self.revocations = (Revocations(self.revocation_store, self.online, self.metrics)
                            if self.revocation_store is not None else None)
        self.limiter = SendLimiter.from_config(config, self.metrics)  # QIM_RATE_*
        # The client port's transports by the ALPN protocol its TLS handshake selected
        # (None: plaintext development), each a FrameTransport (qim/net/transport.py);
        # the port offers exactly these.
        self.websocket = WebSocketUpgrade(self, CLIENT_CHUNK_BYTES)  # QIM_GATEWAY_WS_* (ws.py)
        self.transports: dict[Optional[str], ClientTransport] = {ALPN: self._framed, None: self._framed,
                                                                  ALPN_HTTP: self.websocket.accept}
        self.client_tls = self.tls_contexts(config.client_tls, "client port",
                                            "QIM_GATEWAY_TLS_CERT/QIM_GATEWAY_TLS_KEY",
                                            alpn=[a for a in self.transports if a])
        self.internal_tls = self.tls_contexts(config.internal_tls, "internal", "QIM_INTERNAL_CA/TLS_CERT/TLS_KEY")
        # the ShardRegistry, session epochs and the PresenceDirectory (cluster.py)
        self.cluster = GatewayCluster(config, self.metrics, self.registry) if config.registry is not None else None
        self.epochs = self.cluster.epochs if self.cluster is not None else None
        self.presence = self.cluster.presence if self.cluster is not None else None
        self.locals = build_locals(self)  # backends with state per device session (rooms: backends/room.py)
        for name, local in self.locals.items():
            self.closing(local.close, f"{name} local backend")
        self.router = BackendRouter({s.name: config.peers.get(s.name, ()) for s in gateway_backends()},
                                    tls=self.internal_tls,
                                    owners=self.cluster.owners if self.cluster is not None else None,
                                    local_backends=self.locals, dropped=self.metrics.room_stale.inc,
                                    failovers=lambda backend, reason: self.metrics.failovers.labels(
                                        backend=backend, reason=reason).inc())
        self.push = PushListener(self.online, self.cluster.mailbox_nodes if self.cluster is not None else list,
                                 self.metrics, guard=self.rpc_guard(enforce=self.internal_tls is not None))
        self.push.ephemeral = self.locals.get("writer")  # other gateways' reactions and typing (decision 0121)
        self.always_zero(self.metrics.backend_dropped)
        self.closing(self.router.close, "backend clients")
        if self.revocation_store is not None:
            self.closing(self.revocation_store.close, "revocation store")
        for close, what in self.cluster.closers() if self.cluster is not None else ():
            self.closing(close, what)

    async def _framed(self, reader: ByteReader, writer: ByteWriter) -> Optional[FrameTransport]:
        """ALPN qim/1 (and plaintext development): raw frames (qim/net/framed.py)."""
        return FramedStream(reader, writer, chunk_bytes=CLIENT_CHUNK_BYTES)

    def not_ready(self) -> Iterator[str]:
        """Not joined; the registry not read yet; no push link yet from some mailbox node."""
        if self.cluster is not None:
            yield from self.cluster.not_ready()
        yield from self.push.not_ready()

    async def _on_client(self, link: ClientLink) -> None:
        """One client-port connection: the transport its handshake chose, then the one
        connection handler (the listener already refused an ALPN outside `transports`)."""
        stream = await self.transports[selected_alpn(link)](link, link)
        if stream is not None:  # None: the transport's own handshake refused it
            await ClientConnection(stream, self).run()

    async def serve(self, stream: FrameTransport) -> None:
        """Serve one client link, whatever its transport, until it ends."""
        await ClientConnection(stream, self).run()

    async def setup(self) -> None:
        """Join the registry, push listener first (mailbox nodes link while clients
        connect), then clients; the revocation feed and the JWKS refresh as node tasks."""
        if self.cluster is not None:
            # after a lapse of the node lease the cluster dropped what it had for this
            # gateway's devices: they reconnect to resync (lapse.py, decision 0154)
            self.cluster.keeper.on_lapsed = lambda lapsed_s: resync_all(self.online.connections, lapsed_s)
            await self.cluster.start(self, self.online.connections)
        if self.revocations is not None:
            self.spawn(self.revocations.run(), "revocation feed")
        self.spawn(self.auth.keys.run(), "token keys")
        self.spawn(self.keepalive.run(), "keepalive sweep")
        await self.listen(self.config.push_listen, self.push.on_connection, tls=self.internal_tls, name="push")
        await ClientListener(self, self.client_tls, self._on_client, CLIENT_CHUNK_BYTES,
                             handshake_timeout=self.config.auth_timeout_s,
                             heartbeat_s=self.config.heartbeat_s).start(self.config.listen)
        if self.config.ws_listen:  # development only: plain ws:// on loopback (qim/config_tls.py)
            await self.listen(self.config.ws_listen, self.websocket.serve_plain, name="ws-dev")
        logger.info("gateway listening on %s (push %s%s)", self.config.listen, self.config.push_listen,
                    f", ws:// {self.config.ws_listen}" if self.config.ws_listen else "")
