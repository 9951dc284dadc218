"""ConnectionNode: client listener, push listener, /metrics and /healthz (DESIGN.md §2)."""

from __future__ import annotations

import asyncio
import logging

from google.protobuf.message import DecodeError
from prometheus_client import Counter

from qim.config import GatewayConfig
from qim.net.framed import FramedStream, parse_addr
from qim.net.rpc import serve_rpc
from qim.obs.http import invariant_reasons, serve_http
from qim.proto.v1 import internal_pb2
from qim.protocol import Opcode
from qim.services.gateway.conn import ClientConnection
from qim.services.gateway.router import BackendRouter
from qim.services.gateway.sessions import OnlineRegistry

logger = logging.getLogger(__name__)

# Always zero: the gateway never drops a client request on its way to a backend (the
# per-connection in-flight limit pushes back on the socket instead).
BACKEND_DROPPED = Counter("qim_gateway_backend_queue_dropped", "Client requests dropped before a backend (must stay 0)")
BAD_PUSH = Counter("qim_gateway_bad_push_batches", "Undecodable or unknown frames on the push listener")


class ConnectionNode:
    """`start()` opens the listeners and returns the client server."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.online = OnlineRegistry()
        self.router = BackendRouter(config.writer_addrs, config.mailbox_addrs, config.session_addrs)
        self._conns: set[ClientConnection] = set()

    def not_ready(self):
        yield from invariant_reasons([BACKEND_DROPPED])

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ClientConnection(FramedStream(reader, writer), self)
        self._conns.add(conn)
        try:
            await conn.run()
        finally:
            self._conns.discard(conn)

    async def _on_push(self, opcode: int, body: bytes) -> None:
        try:
            if opcode == Opcode.PUSH_BATCH:
                self.online.deliver(internal_pb2.PushBatch.FromString(body))
            elif opcode == Opcode.DEVICE_FRAMES:
                self.online.deliver_frames(internal_pb2.DeviceFrames.FromString(body))
            else:
                BAD_PUSH.inc()
        except DecodeError:
            BAD_PUSH.inc()

    async def _no_requests(self, opcode: int, body: bytes) -> tuple[int, bytes]:
        from qim.errors import ErrorCode, RequestError

        raise RequestError(ErrorCode.INVALID_ARGUMENT, "push listener takes only PUSH_BATCH")

    async def start(self) -> asyncio.AbstractServer:
        await serve_http(self.config.metrics_listen, self.not_ready)
        host, port = parse_addr(self.config.push_listen)
        await serve_rpc(host, port, self._no_requests, 64, on_oneway=self._on_push)
        host, port = parse_addr(self.config.listen)
        server = await asyncio.start_server(self._on_client, host, port)
        logger.info("gateway listening on %s (push %s)", self.config.listen, self.config.push_listen)
        return server
