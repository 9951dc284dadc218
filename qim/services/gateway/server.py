"""ConnectionNode: client listener, push listener, /metrics and /healthz (DESIGN.md §2).

Ready once every mailbox node of QIM_MAILBOX_ADDRS has linked its push path to this
gateway (qim/services/gateway/pushlink.py): until then a device could log in and miss
its pushes.
"""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import Counter

from qim.config import GatewayConfig
from qim.net.framed import FramedStream, parse_addr
from qim.obs.http import invariant_reasons, serve_http
from qim.services.gateway.conn import CLIENT_CHUNK_BYTES, ClientConnection
from qim.services.gateway.pushlink import PushListener
from qim.services.gateway.router import BackendRouter
from qim.services.gateway.sessions import OnlineRegistry

logger = logging.getLogger(__name__)

# Always zero: the gateway never drops a client request on its way to a backend (the
# per-connection in-flight limit pushes back on the socket instead).
BACKEND_DROPPED = Counter("qim_gateway_backend_queue_dropped", "Client requests dropped before a backend (must stay 0)")


class ConnectionNode:
    """`start()` opens the listeners and returns the client server."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.online = OnlineRegistry()
        self.router = BackendRouter(config.writer_addrs, config.mailbox_addrs, config.session_addrs)
        self.push = PushListener(self.online, len(config.mailbox_addrs))
        self._conns: set[ClientConnection] = set()

    def not_ready(self):
        yield from self.push.not_ready()
        yield from invariant_reasons([BACKEND_DROPPED])

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ClientConnection(FramedStream(reader, writer, chunk_bytes=CLIENT_CHUNK_BYTES), self)
        self._conns.add(conn)
        try:
            await conn.run()
        finally:
            self._conns.discard(conn)

    async def start(self) -> asyncio.AbstractServer:
        await serve_http(self.config.metrics_listen, self.not_ready)
        await self.push.start(*parse_addr(self.config.push_listen))
        host, port = parse_addr(self.config.listen)
        server = await asyncio.start_server(self._on_client, host, port)
        logger.info("gateway listening on %s (push %s)", self.config.listen, self.config.push_listen)
        return server
