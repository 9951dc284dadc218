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
- Connections are made and accepted in plaintext and upgraded in place
  (`connect()` / `accept()`), which lets the raw TCP transport keep about one chunk, as
  in plaintext (decision 0011): below asyncio's TLS layer the TCP transport keeps its
  own write buffer, whose 64 KiB default held a PONG behind ~112 KiB of a stuck frame
  with 16 KiB chunks (64 KiB with the limit; tests/net/test_tls_framed_slow_peer.py).
  It also gives one place to time out, count and log a failed handshake (asyncio's own
  `start_server(ssl=)` only reports it to the loop's exception handler).
- `TlsContexts.reload()` rebuilds the contexts from their files: new connections use the
  new certificate (a process reloads on SIGHUP), established ones keep theirs.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import ssl
import time
import types
from dataclasses import dataclass
from typing import Any, Callable, Coroutine, Generator, Optional, Protocol, Sequence, TypeVar, Union, cast

from qim.errors import TlsError

# re-exported: callers name them qim.net.tls.*
from qim.net.tls_failures import HandshakeFailed as HandshakeFailed
from qim.net.tls_failures import describe as describe
from qim.net.tls_failures import handshake_failure as handshake_failure

ALPN = "qim/1"  # raw frames (qim/net/framed.py)
ALPN_HTTP = "http/1.1"  # a WebSocket upgrade on the same client port (qim/net/websocket.py)
SERVICE_URI_PREFIX = "qim://service/"
HANDSHAKE_TIMEOUT_S = 10.0
T = TypeVar("T")
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


async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, context: ssl.SSLContext,
                 chunk_bytes: int, timeout: float = HANDSHAKE_TIMEOUT_S) -> None:
    """Upgrade a just-accepted connection to TLS as the server. Call it first thing in
    the connection's callback, before anything awaits. Raises ssl.SSLError,
    ConnectionError/OSError (a handshake slower than `timeout` is a
    ConnectionAbortedError); `handshake_failure` names them. The connection is closed on
    failure (after the alert that tells the peer why).

    The ClientHello may already sit in `reader`: asyncio's loop only starts reading after
    this callback's first step, but uvloop reads as soon as the connection is made, so a
    client that sends at once (or a busy loop) leaves its first bytes in the plaintext
    reader, where the TLS layer never saw them and the handshake hung until `timeout`
    (docs/decisions/0027). Those bytes are handed to the TLS layer before anything else
    it reads."""
    # a socket transport (asyncio's or uvloop's, which is not an asyncio.Transport subclass)
    transport = cast(asyncio.Transport, writer.transport)
    transport.pause_reading()  # nothing more reaches the plaintext reader
    early = _take_buffered(reader)
    _limit_raw_buffer(writer, chunk_bytes)
    try:
        upgrade = writer.start_tls(context, ssl_handshake_timeout=timeout)
        await _after_first_step(upgrade, lambda: _feed_tls_layer(transport, early))
    except BaseException:
        writer.transport.close()  # asyncio closes it too; idempotent
        raise


def _take_buffered(reader: asyncio.StreamReader) -> bytes:
    """The bytes the plaintext reader already holds (emptied). StreamReader has no public
    way to take them without waiting when there are none: its `_buffer` is read here."""
    buffered: bytearray = reader._buffer  # type: ignore[attr-defined]  # see above
    early = bytes(buffered)
    buffered.clear()
    return early


def _feed_tls_layer(transport: asyncio.BaseTransport, early: bytes) -> None:
    """Give `early` to the TLS protocol just installed on `transport` (asyncio's and
    uvloop's SSLProtocol are buffered protocols whose incoming BIO exists from their
    construction, so bytes given before their `connection_made` start the handshake)."""
    if not early:
        return
    installed = transport.get_protocol()
    # uvloop's SSLProtocol is a Cython class, not an asyncio.BufferedProtocol: duck-typed
    if isinstance(installed, asyncio.StreamReaderProtocol) or not hasattr(installed, "buffer_updated"):
        raise TlsError(f"cannot hand {len(early)} early bytes to the TLS layer: "
                       f"{type(installed).__name__} is not the TLS protocol")
    tls_protocol = cast(asyncio.BufferedProtocol, installed)
    view = memoryview(early)
    while view:
        buf = memoryview(tls_protocol.get_buffer(len(view))).cast("B")
        n = min(len(buf), len(view))
        buf[:n] = view[:n]
        tls_protocol.buffer_updated(n)
        view = view[n:]


@types.coroutine
def _after_first_step(coro: Coroutine[Any, Any, T], then: Callable[[], None]) -> Generator[Any, Any, T]:
    """Await `coro`, calling `then()` right after its first step (before the loop runs
    anything else). StreamWriter.start_tls installs the TLS protocol and schedules its
    `connection_made` and the transport's `resume_reading` synchronously before its first
    suspension: `then` runs in between, where bytes can be given to the TLS layer in order."""
    step = coro.__await__()
    try:
        yielded = step.send(None)
    except StopIteration as done:
        then()
        return done.value
    try:
        then()
    except BaseException:
        step.close()
        raise
    while True:
        try:
            sent = yield yielded
        except BaseException as exc:  # cancellation or a thrown error goes to `coro`
            try:
                yielded = step.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                yielded = step.send(sent)
            except StopIteration as done:
                return done.value


async def connect(host: str, port: int, context: ssl.SSLContext, *, server_hostname: Optional[str],
                  chunk_bytes: int, timeout: float) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Open a TCP connection and upgrade it to TLS as the client (certificate verified by
    `context`). Raises OSError or asyncio.TimeoutError when no TCP connection is made in
    `timeout`, HandshakeFailed (an OSError) when the handshake fails or takes longer, or
    the connection closed under it (uvloop's RuntimeError on a closed transport);
    nothing stays open on failure."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        _limit_raw_buffer(writer, chunk_bytes)
        await writer.start_tls(context, server_hostname=server_hostname, ssl_handshake_timeout=timeout)
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
