"""WebSocket at the ConnectionNode (docs/protocol.md "WebSocket"; docs/operations.md
"WebSocket"; docs/decisions/0030-edge-transport-seam-and-websocket.md).

A browser and a native client use one address: on the client port a TLS handshake that
selected ALPN `http/1.1` is a WebSocket upgrade on WS_PATH (`accept`, the gateway's
transport for that ALPN); `qim/1` stays raw frames. Either way the connection is served
by the one ClientConnection (AUTH, limits, rate buckets, back-pressure, chunking);
only the FrameTransport below it differs (qim/net/websocket.py). QIM_GATEWAY_WS_LISTEN
adds a plain ws:// listener for development (loopback only: qim/config_tls.py).

The Origin header is checked against QIM_GATEWAY_WS_ORIGINS (qim/net/ws_handshake.py);
every refused upgrade is counted (qim_gateway_ws_refused_total{reason}) and logged at
most once a second.
"""

from __future__ import annotations

import logging
import time
from typing import Optional, Protocol

from qim.config import GatewayConfig
from qim.net.transport import ByteReader, ByteWriter, FrameTransport, release
from qim.net.websocket import WebSocketStream
from qim.net.ws_handshake import UpgradeRefused, accept_upgrade, origin_patterns
from qim.services.gateway.metrics import GatewayMetrics

logger = logging.getLogger(__name__)
LOG_EVERY_S = 1.0



class UpgradeNode(Protocol):
    """What the WebSocket transport uses of its gateway node (server.py ConnectionNode)."""

    @property
    def config(self) -> GatewayConfig:
        """QIM_GATEWAY_WS_ORIGINS and QIM_AUTH_TIMEOUT_MS."""
        ...

    @property
    def metrics(self) -> GatewayMetrics:
        """qim_gateway_ws_* counters."""
        ...

    async def serve(self, stream: FrameTransport) -> None:
        """Serve one client link until it ends (the node's connection handler)."""
        ...


class WebSocketUpgrade:
    """The WebSocket transport of one gateway `node` (its `config`: ws_origins,
    auth_timeout_s; its `metrics`: GatewayMetrics); `chunk_bytes` is the chunk size
    toward clients (one chunk per message)."""

    def __init__(self, node: UpgradeNode, chunk_bytes: int) -> None:
        self._node = node
        self._origins = origin_patterns(node.config.ws_origins)
        self._timeout = node.config.auth_timeout_s  # the upgrade request comes first, then AUTH
        self._chunk_bytes = chunk_bytes
        self._logged = 0.0

    async def accept(self, reader: ByteReader, writer: ByteWriter) -> Optional[FrameTransport]:
        """Answer the upgrade: the WebSocketStream, or None when refused (answered with its
        HTTP status, counted, closed)."""
        try:
            ws, events = await accept_upgrade(reader, writer, self._origins, self._timeout)
        except UpgradeRefused as exc:
            self._node.metrics.ws_refused.labels(reason=exc.reason).inc()
            self._log(writer, exc)
            return None
        except (ConnectionError, OSError) as exc:  # the peer went away during the upgrade
            self._node.metrics.ws_refused.labels(reason="closed").inc()
            release(exc)
            writer.close()
            return None
        self._node.metrics.ws_connections.inc()
        return WebSocketStream(reader, writer, ws, events, chunk_bytes=self._chunk_bytes)

    async def serve_plain(self, reader: ByteReader, writer: ByteWriter) -> None:
        """A connection of the development ws:// listener: the upgrade, then the node's
        connection handler."""
        stream = await self.accept(reader, writer)
        if stream is not None:
            await self._node.serve(stream)

    def _log(self, writer: ByteWriter, exc: UpgradeRefused) -> None:
        now = time.monotonic()
        if now - self._logged >= LOG_EVERY_S:
            self._logged = now
            peer = writer.get_extra_info("peername")
            logger.info("WebSocket upgrade from %s refused: %s", f"{peer[0]}:{peer[1]}" if peer else "?", exc)
