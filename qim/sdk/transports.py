"""How the SDK reaches a gateway: the endpoint's form picks the transport
(qim/net/transport.py; docs/sdk.md "Endpoints").

| endpoint | transport | TLS |
|---|---|---|
| `host:port` | raw frames (qim/net/framed.py) | TLS 1.3, ALPN qim/1 (plaintext: development, loopback) |
| `wss://host:port/qim/ws` | one frame per WebSocket message (qim/net/websocket.py) | TLS 1.3, ALPN http/1.1 |
| `ws://host:port/qim/ws` | the same, in the clear | none: development, loopback only |

Both are the same gateway protocol: AUTH, requests, pushes and limits do not depend on
the transport. Errors: ConnectionLost when the endpoint cannot be reached or the
connection broke off (the runtime retries), TlsError when trying again cannot help (an
untrusted certificate, no TLS 1.3, a port that is not a QIM gateway's, a WebSocket
upgrade refused with a 4xx), ValueError for a malformed endpoint. The WebSocket
transport needs the `websockets` package (`pip install 'qim[ws]'`).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass
from typing import Optional
from urllib.parse import urlsplit

from qim.consts import STREAM_WRITE_CHUNK_BYTES
from qim.errors import TlsError
from qim.net import tls as qtls
from qim.net.framed import FramedStream, open_stream, parse_addr
from qim.net.transport import FrameTransport
from qim.sdk.events import ConnectionLost


@dataclass(frozen=True)
class Endpoint:
    """A parsed endpoint: `scheme` ("tcp" for host:port), `host`, `port`, `uri` (the
    WebSocket URI; "" for tcp)."""

    scheme: str
    host: str
    port: int
    uri: str = ""

    @property
    def websocket(self) -> bool:
        """True for ws:// and wss://."""
        return self.scheme != "tcp"


def parse_endpoint(endpoint: str) -> Endpoint:
    """'host:port', 'ws://host:port/path' or 'wss://host:port/path' (the port of a URI
    defaults to 80/443). ValueError for anything else."""
    if "://" not in endpoint:
        host, port = parse_addr(endpoint)
        return Endpoint("tcp", host, port)
    parts = urlsplit(endpoint)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise ValueError(f"bad endpoint {endpoint!r}: expected host:port, ws://host:port/path or wss://host:port/path")
    try:
        port = parts.port or (443 if parts.scheme == "wss" else 80)
    except ValueError:
        raise ValueError(f"bad endpoint {endpoint!r}: bad port") from None
    return Endpoint(parts.scheme, parts.hostname, port, endpoint)


def endpoint_tls(endpoint: str, ca_file: Optional[str], ssl_context: Optional[ssl.SSLContext],
                 plaintext: bool) -> Optional[ssl.SSLContext]:
    """The TLS context for `endpoint` (qim/sdk/connection.py client_tls documents the
    choices): ws:// and plaintext=True are loopback only, wss:// offers ALPN http/1.1."""
    ep = parse_endpoint(endpoint)
    if plaintext or ep.scheme == "ws":
        if ca_file or ssl_context:
            raise ValueError(f"{endpoint}: a plaintext endpoint takes no ca_file or ssl_context")
        if ep.scheme == "wss":
            raise ValueError(f"{endpoint}: wss:// is TLS; plaintext=True is for host:port or ws://")
        if not qtls.is_loopback(ep.host):
            raise ValueError(f"plaintext only toward a loopback gateway, not {endpoint}")
        return None
    alpn = qtls.ALPN_HTTP if ep.websocket else qtls.ALPN
    return ssl_context or qtls.client_port_context(qtls.ca_file_from_env(ca_file), alpn=alpn)


class ProgressReader:
    """The StreamReader a transport reads from, noting when bytes last arrived."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self.last_rx = time.monotonic()
        self.bytes_rx = 0

    async def read(self, n: int = -1) -> bytes:
        """As StreamReader.read, recording the time and count of bytes received."""
        data = await self._reader.read(n)
        if data:
            self.last_rx = time.monotonic()
            self.bytes_rx += len(data)
        return data


async def _open_tcp(ep: Endpoint, endpoint: str, tls: Optional[ssl.SSLContext],
                    timeout: float) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    try:
        reader, writer = await open_stream(ep.host, ep.port, timeout, tls, server_hostname=ep.host,
                                           chunk_bytes=STREAM_WRITE_CHUNK_BYTES)
    except qtls.HandshakeFailed as exc:
        if exc.permanent:
            raise TlsError(f"TLS to {endpoint} refused: {exc.detail}") from exc
        raise ConnectionLost(f"TLS to {endpoint} broke off: {exc}") from exc
    except (OSError, asyncio.TimeoutError) as exc:
        raise ConnectionLost(f"cannot reach {endpoint}: {exc.__class__.__name__}") from exc
    if tls is not None:
        want = qtls.ALPN_HTTP if ep.websocket else qtls.ALPN
        chosen = qtls.selected_alpn(writer)
        # a TLS front of a WebSocket endpoint may choose no ALPN; a raw-frame port must choose qim/1
        if chosen != want and not (ep.websocket and chosen is None):
            writer.transport.abort()
            raise TlsError(f"{endpoint} did not agree to ALPN {want}: not a QIM gateway port")
    return reader, writer


async def open_transport(endpoint: str, tls: Optional[ssl.SSLContext],
                         timeout: float) -> tuple[FrameTransport, ProgressReader]:
    """Connect to `endpoint` with the transport its form names (module doc); the
    transport and the reader that notes incoming progress. Errors: module doc."""
    ep = parse_endpoint(endpoint)
    reader, writer = await _open_tcp(ep, endpoint, tls, timeout)
    progress = ProgressReader(reader)
    if not ep.websocket:
        return FramedStream(progress, writer), progress  # FramedStream only calls read(n)
    try:
        from qim.net.websocket import WebSocketStream
        from qim.net.ws_handshake import UpgradeRefused, connect_upgrade
    except ModuleNotFoundError as exc:
        writer.transport.abort()
        raise TlsError(f"{endpoint}: the WebSocket transport needs the websockets package "
                       "(pip install 'qim[ws]')") from exc
    try:
        ws, events = await connect_upgrade(reader, writer, ep.uri, None, timeout)
    except UpgradeRefused as exc:
        writer.transport.abort()
        if 400 <= exc.status < 500:
            raise TlsError(f"{endpoint} is not a QIM WebSocket endpoint: {exc}") from exc
        raise ConnectionLost(f"{endpoint}: {exc}") from exc
    except (OSError, asyncio.TimeoutError) as exc:
        writer.transport.abort()
        raise ConnectionLost(f"{endpoint}: WebSocket upgrade failed: {exc.__class__.__name__}") from exc
    return WebSocketStream(progress, writer, ws, events), progress
