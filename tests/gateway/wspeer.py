"""An in-process ConnectionNode with a TLS client port (raw frames and WebSocket on one
address) and a plain ws:// development listener, no backends; and a WebSocket client
that is not QIM's: the `websockets` library's own asyncio client, so what these tests
check does not share the gateway's WebSocket code.

`ws_client(node, origin=...)` opens wss://…/qim/ws (ALPN http/1.1); `frame(op, rid,
body)` is one chunk of the 20-byte-header protocol (the codec's golden form);
`frames_of(messages)` decodes what the gateway sent."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import AsyncIterator, Optional

from websockets.asyncio.client import ClientConnection, connect

from qim._core import frame as frame_codec
from qim.consts import WS_PATH
from qim.dev.certs import CLIENT_PORT, ensure_dev_pki
from qim.dev.lone_gateway import free_port as _free_port
from qim.net.tls import ALPN_HTTP, TlsFiles, client_port_context
from qim.proto.v1 import connection_pb2
from qim.protocol import Opcode
from qim.services.gateway.server import ConnectionNode
from tests.gateway import standin

ORIGIN = "https://chat.example.com"


@contextlib.asynccontextmanager
async def gateway(tmp: Path, **overrides) -> AsyncIterator[ConnectionNode]:
    """A started ConnectionNode (client port TLS, ws_origins=(ORIGIN, http://localhost:*),
    a ws:// listener); `node.ca_file`, `node.addr`, `node.ws_addr`."""
    pki = ensure_dev_pki(tmp / "tls")
    files = pki.files(CLIENT_PORT)
    fields = dict(listen=f"127.0.0.1:{_free_port()}", push_listen=f"127.0.0.1:{_free_port()}",
                  metrics_listen=f"127.0.0.1:{_free_port()}", client_tls=TlsFiles(files.cert, files.key),
                  ws_origins=(ORIGIN, "http://localhost:*"), ws_listen=f"127.0.0.1:{_free_port()}",
                  auth_timeout_s=3.0)
    fields.update(overrides)
    node = ConnectionNode(standin.config(**fields))
    await node.start()
    node.ca_file = pki.ca_file
    node.addr = node.config.listen
    node.ws_addr = node.config.ws_listen
    try:
        yield node
    finally:
        await node.stop()


async def ws_client(node: ConnectionNode, origin: Optional[str] = None, path: str = WS_PATH,
                    secure: bool = True) -> ClientConnection:
    """The library's client on wss:// (or ws:// on the development listener), no
    compression, no size limit of its own (the gateway's is under test)."""
    if secure:
        ctx = client_port_context(node.ca_file, alpn=ALPN_HTTP)
        return await connect(f"wss://{node.addr}{path}", ssl=ctx, origin=origin, compression=None,  # type: ignore[arg-type]
                             max_size=None, ping_interval=None, open_timeout=10)
    return await connect(f"ws://{node.ws_addr}{path}", origin=origin, compression=None,  # type: ignore[arg-type]
                         max_size=None, ping_interval=None, open_timeout=10)


def frame(opcode: int, request_id: int, body: bytes, chunk: int = 64 * 1024) -> list[bytes]:
    """The chunks of one frame (each one WebSocket message)."""
    return frame_codec.encode_frame(opcode, request_id, body, False, chunk)


def auth_frame(user: int, device: int = 1, rid: int = 1) -> bytes:
    """AUTH with a token the stand-in trusts."""
    return frame(Opcode.AUTH, rid, connection_pb2.Auth(token=standin.token(user, device)).SerializeToString())[0]


def frames_of(messages: list[bytes]) -> list[tuple[int, int, bytes]]:
    """Whole frames in the gateway's messages, each message checked to be one chunk."""
    dec = frame_codec.FrameDecoder()
    out = []
    for m in messages:
        assert len(m) == 20 + int.from_bytes(m[12:16], "big"), "a gateway message is exactly one chunk"
        out.extend(dec.feed(m))
    return out


async def request(ws: ClientConnection, opcode: int, rid: int, body: bytes = b"") -> tuple[int, int, bytes]:
    """Send one frame (one message per chunk) and read messages until its reply."""
    for chunk in frame(opcode, rid, body):
        await ws.send(chunk)
    dec = frame_codec.FrameDecoder()
    while True:
        message = await ws.recv()
        assert isinstance(message, bytes), "the gateway sends binary messages only"
        for got in dec.feed(message):
            if got[1] == rid:
                return got
