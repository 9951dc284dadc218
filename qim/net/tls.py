"""TLS 1.3 for the client port and mutual TLS between services (docs/design.md §4;
docs/decisions/0022-tls-in-place-upgrade-and-service-identity.md).

Only the standard library's `ssl` (the SDK and the services need nothing else).

- Client port: TLS 1.3 only, ALPN `qim/1` (a handshake that did not select it is closed
  at once), the server certificate verified by the client against a CA file.
- Internal RPC: TLS 1.3 with a certificate on both sides, every certificate issued by
  the internal CA bundle. A certificate names its service in a SAN URI
  `qim://service/<name>` (`peer_service()`): the per-opcode allow-list
  (qim/net/allow.py) is checked against that name, never against a fixed leaf, so new
  leaves under a trusted CA need no configuration change. Host names are not checked
  between services: the identity is the service name, and the dialling side checks it
  is the service it meant to reach.
- Every listener, the client port and the internal ones, accepts ClientLinks
  (qim/net/link_server.py, qim/net/link.py: ssl.SSLObject over MemoryBIOs; decisions
  0050, 0119): the one TLS path that times out, counts and logs a failed handshake
  (asyncio's own `start_server(ssl=)` only reports it to the loop's exception
  handler), and whose TCP transport keeps about one chunk, as in plaintext (decision
  0011). A dialling side connects in plaintext and upgrades in place (`connect()`),
  the TCP transport below the TLS layer limited to about one chunk as well: its 64 KiB
  default held a PONG behind ~112 KiB of a stuck frame with 16 KiB chunks.
- `TlsContexts.reload()` rebuilds the contexts from their files: new connections use the
  new certificate (a process reloads on SIGHUP), established ones keep theirs.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import ssl
import time
from dataclasses import dataclass
from typing import Any, Optional, Protocol, Sequence, Union

from qim.errors import TlsError

# re-exported: callers name them qim.net.tls.*
from qim.net.tls_failures import HandshakeFailed as HandshakeFailed
from qim.net.tls_failures import describe as describe
from qim.net.tls_failures import handshake_failure as handshake_failure

ALPN = "qim/1"  # raw frames (qim/net/framed.py)
ALPN_HTTP = "http/1.1"  # a WebSocket upgrade on the same client port (qim/net/websocket.py)
SERVICE_URI_PREFIX = "qim://service/"
HANDSHAKE_TIMEOUT_S = 10.0
# the ALPN protocol(s) a server offers, in its order of preference; None: no ALPN
Alpn = Union[str, Sequence[str], None]


def alpn_protocols(alpn: Alpn) -> tuple[str, ...]:
    """`alpn` as a tuple of protocol names (() for None)."""
    if not alpn:
        return ()
    return (alpn,) if isinstance(alpn, str) else tuple(alpn)


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of one TLS identity: `cert` (leaf first, then intermediates), `key`,
    and `ca`, the bundle trusted for the peer's certificate ("" on the client port,
    where clients present none). During a CA rotation `ca` holds the old and the new CA."""

    cert: str
    key: str
    ca: str = ""


def _tls13(ctx: ssl.SSLContext) -> ssl.SSLContext:
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.maximum_version = ssl.TLSVersion.TLSv1_3
    return ctx


def _load_identity(ctx: ssl.SSLContext, files: TlsFiles, what: str) -> None:
    try:
        ctx.load_cert_chain(files.cert, files.key)
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(f"{what}: cannot load certificate {files.cert} with key {files.key}: "
                       f"{getattr(exc, 'reason', None) or exc.strerror or exc}") from None


def _load_ca(ctx: ssl.SSLContext, ca: str, what: str) -> None:
    try:
        ctx.load_verify_locations(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(f"{what}: cannot load CA bundle {ca}: "
                       f"{getattr(exc, 'reason', None) or exc.strerror or exc}") from None


def server_context(files: TlsFiles, *, alpn: Alpn = None) -> ssl.SSLContext:
    """A TLS 1.3 server context for `files`; with `files.ca` a client certificate issued
    by that bundle is required (mutual TLS). `alpn`: the protocol(s) offered (the caller
    checks one was selected: `check_alpn`). Raises TlsError naming the file."""
    ctx = _tls13(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
    ctx.num_tickets = 0  # no resumption: asyncio clients never offer a session back
    _load_identity(ctx, files, "server")
    if files.ca:
        _load_ca(ctx, files.ca, "server")
        ctx.verify_mode = ssl.CERT_REQUIRED
    if alpn:
        ctx.set_alpn_protocols(list(alpn_protocols(alpn)))
    return ctx


def internal_client_context(files: TlsFiles) -> ssl.SSLContext:
    """A TLS 1.3 client context presenting `files.cert` and trusting `files.ca` for the
    server; host names are not checked (the service identity is: `expect_service`)."""
    ctx = _tls13(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    _load_ca(ctx, files.ca, "client")
    _load_identity(ctx, files, "client")
    return ctx


def client_port_context(ca_file: Optional[str] = None, alpn: str = ALPN) -> ssl.SSLContext:
    """What a client (SDK, loadgen, qim-desktop) uses toward the gateway: TLS 1.3, ALPN
    qim/1 (`alpn=ALPN_HTTP` for a WebSocket client), the server certificate verified
    (host name included) against `ca_file`, or against the system's trust store when
    None. TlsError when the file cannot be read."""
    ctx = _tls13(ssl.create_default_context())
    if ca_file:
        _load_ca(ctx, ca_file, "client")
    ctx.set_alpn_protocols([alpn])
    return ctx


class TlsContexts:
    """The current server (and, with a CA, client) context of one TlsFiles.

    `server` serves a listener; `client` dials other services (None on the client port).
    `reload()` builds both afresh from the files and swaps them in only when both built:
    a bad file raises TlsError and leaves the ones in use. `alpn` is offered by `server`."""

    def __init__(self, files: TlsFiles, *, alpn: Alpn = None) -> None:
        self.files = files
        self.alpn = alpn
        self.server, self.client = self._build()
        self.loaded_at = time.time()

    def _build(self) -> tuple[ssl.SSLContext, Optional[ssl.SSLContext]]:
        server = server_context(self.files, alpn=self.alpn)
        client = internal_client_context(self.files) if self.files.ca else None
        return server, client

    def reload(self) -> None:
        """Rebuild from the files (new connections use the result). TlsError when a file
        is missing or bad; the contexts in use stay."""
        self.server, self.client = self._build()
        self.loaded_at = time.time()


class ExtraInfo(Protocol):
    """Anything with a transport's `get_extra_info` (a StreamWriter, a ClientLink)."""

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """The named extra information, `default` when there is none."""
        ...


def peer_service(writer: ExtraInfo) -> Optional[str]:
    """The service a verified peer certificate names (SAN URI qim://service/NAME), None
    for a plaintext connection or a certificate without such a name."""
    cert = writer.get_extra_info("peercert")
    if not cert:
        return None
    for kind, value in cert.get("subjectAltName", ()):
        if kind == "URI" and value.startswith(SERVICE_URI_PREFIX):
            name = value[len(SERVICE_URI_PREFIX):]
            if name and name.isascii() and name.replace("-", "").isalnum():
                return name
    return None


def selected_alpn(writer: ExtraInfo) -> Optional[str]:
    """The ALPN protocol the TLS handshake on `writer` selected (None: plaintext, or none)."""
    sslobj = writer.get_extra_info("ssl_object")
    return sslobj.selected_alpn_protocol() if sslobj is not None else None


def check_alpn(writer: ExtraInfo, offered: Alpn = ALPN) -> bool:
    """True when the TLS handshake on `writer` selected one of `offered` (default qim/1)."""
    return selected_alpn(writer) in alpn_protocols(offered)


def _limit_raw_buffer(writer: asyncio.StreamWriter, chunk_bytes: int) -> None:
    """About one chunk in the TCP transport below the TLS layer (module doc; the TLS
    transport's own limit is set by FramedStream)."""
    if writer.transport is not None:
        writer.transport.set_write_buffer_limits(high=chunk_bytes, low=chunk_bytes // 4)


# How long past its own ssl_handshake_timeout a start_tls may run before connect()
# gives up on it (the loop's timeout fires first whenever it works).
HANDSHAKE_BOUND_SLACK_S = 1.0


async def connect(host: str, port: int, context: ssl.SSLContext, *, server_hostname: Optional[str],
                  chunk_bytes: int, timeout: float) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Open a TCP connection and upgrade it to TLS as the client (certificate verified by
    `context`). Raises OSError or asyncio.TimeoutError when no TCP connection is made in
    `timeout`, HandshakeFailed (an OSError) when the handshake fails or takes longer (at
    most `timeout` + HANDSHAKE_BOUND_SLACK_S even when the loop's handshake timeout does
    not fire), or the connection closed under it (uvloop's RuntimeError on a closed
    transport); nothing stays open on failure."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        _limit_raw_buffer(writer, chunk_bytes)
        # the loop's own handshake timeout is the rule; the outer bound is for the paths
        # where it does not fire (start_tls hangs on some handshake-failure paths of
        # CPython < 3.13 and uvloop, gh-142352 family): a connect that never ends held
        # an RpcClient's connect lock, so every later call to that peer waited for ever
        # (a gateway that stopped forwarding sends: docs/decisions/0151)
        await asyncio.wait_for(writer.start_tls(context, server_hostname=server_hostname,
                                                ssl_handshake_timeout=timeout), timeout + HANDSHAKE_BOUND_SLACK_S)
    except (OSError, asyncio.TimeoutError) as exc:
        writer.transport.close()
        raise HandshakeFailed(exc) from exc
    except RuntimeError as exc:
        # uvloop: "unable to perform operation on <TCPTransport closed=True>": the peer
        # closed the connection between the TCP connect and now (issue 33 item 2)
        writer.transport.close()
        raise HandshakeFailed(ConnectionResetError(f"connection closed during the TLS connect ({exc})")) from exc
    except BaseException:
        writer.transport.close()
        raise
    return reader, writer


def is_loopback(host: str) -> bool:
    """localhost, 127.0.0.0/8 or ::1: where plaintext is allowed for development."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def ca_file_from_env(explicit: Optional[str] = None) -> Optional[str]:
    """`explicit`, else $QIM_CA_FILE, else None (the system trust store)."""
    return explicit or os.environ.get("QIM_CA_FILE") or None
