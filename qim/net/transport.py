"""What a connection handler uses of the link that carries its frames: the transport seam
at the device edge (docs/decisions/0030-edge-transport-seam-and-websocket.md).

The gateway's ClientConnection and the SDK's Connection speak QIM frames (docs/design.md §4)
through a `FrameTransport` and never touch sockets, TLS objects or WebSocket messages.
One file per transport implements it:
- `qim/net/framed.py` FramedStream: the frames as a byte stream over TCP (or TLS);
- `qim/net/websocket.py` WebSocketStream: one frame (one chunk of the 20-byte-header
  protocol) per binary WebSocket message, over the same TCP (or TLS) stream.
Both share the outbound chunk order (`qim/net/chunks.py`) and the frame decoder, so
limits, chunking and back-pressure are the same whatever the transport.
"""

from __future__ import annotations

import logging
import socket
from typing import Any, Optional, Protocol

logger = logging.getLogger(__name__)


class StreamClosed(ConnectionError):
    """The link was closed locally or by the peer (a transport error is its cause)."""


def release(exc: BaseException) -> BaseException:
    """Drop the traceback of `exc`, a connection's terminal error, once it is handled;
    returns `exc`. asyncio keeps that error in the connection's StreamReader (and the
    futures that waited on it), and its traceback holds the frames that hold the reader:
    a reference cycle, so the whole connection (with its TLS buffers, 256 KiB under
    uvloop) waited for the next full garbage collection instead of being freed when it
    closed (docs/decisions/0029-edge-connections-freed-when-they-close.md)."""
    exc.__traceback__ = None
    return exc


class ByteReader(Protocol):
    """What a transport reads its bytes from: an asyncio.StreamReader or a wrapper of one
    (the SDK's connection counts the bytes it receives)."""

    async def read(self, n: int = -1) -> bytes:
        """Up to `n` bytes; b"" at EOF."""
        ...


class ByteWriter(Protocol):
    """What a transport writes its bytes to: an asyncio.StreamWriter, or the client
    port's ClientLink (qim/net/link.py). `transport` is the one below that holds the
    bytes not yet sent (its write-buffer limits, its size, `abort()`), None once lost."""

    @property
    def transport(self) -> Any:
        """The asyncio transport below (None once lost)."""
        ...

    def write(self, data: bytes) -> None:
        """Hand `data` on (dropped once closing)."""
        ...

    async def drain(self) -> None:
        """Wait while the transport holds more than its limit (ConnectionError once lost)."""
        ...

    def close(self) -> None:
        """Close after what was written."""
        ...

    def is_closing(self) -> bool:
        """True once closing or lost."""
        ...

    async def wait_closed(self) -> None:
        """Wait until closed."""
        ...

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """The transport's extra information ("peername", "socket", "ssl_object", ...)."""
        ...


class FrameTransport(Protocol):
    """One link that carries QIM frames.

    Reading: `read_frame()` -> (opcode, request_id, body) of the next whole (reassembled)
    frame, None on a clean end; FrameError on a bad frame (no resync: the caller aborts),
    TruncatedFrame when the link ends inside one, FrameTooLarge past `buffer_limit`
    bytes of partial frames (None: only the decoder's own limits), StreamClosed when the
    link broke. Writing: `send()` queues a frame and returns at once (StreamClosed after
    close); `queued_bytes` is what waits; `wait_writable(limit)` waits until at most
    `limit` bytes wait (the reader's back-pressure point); `flush()` until everything was
    handed on. `close()` ends after the queued frames, `abort(reason)` at once, dropping
    them (`reason`: a short line a transport with close codes tells the peer);
    `wait_closed()` waits for the end. `peer` ('host:port') and `peer_service` (the
    service named by a verified certificate, None without) identify the other side.
    """

    buffer_limit: Optional[int]

    @property
    def queued_bytes(self) -> int:
        """Outbound bytes queued and not yet handed to the link."""
        ...

    @property
    def closed(self) -> bool:
        """True once closed locally or by the peer."""
        ...

    @property
    def peer(self) -> str:
        """'host:port' of the peer ('?' when unknown): for log lines."""
        ...

    @property
    def peer_service(self) -> Optional[str]:
        """The service a verified peer certificate names, None without one."""
        ...

    async def read_frame(self) -> Optional[tuple[int, int, bytes]]:
        """The next whole frame, None at a clean end (errors: class doc)."""
        ...

    def send(self, opcode: int, request_id: int, body: bytes, compress: bool = False) -> None:
        """Queue one frame (StreamClosed when closed, FrameTooLarge over 4 MiB)."""
        ...

    async def wait_writable(self, limit: int) -> None:
        """Wait while more than `limit` bytes are queued (returns at once when closed)."""
        ...

    async def flush(self) -> None:
        """Wait until every queued frame was handed on (StreamClosed when the link broke)."""
        ...

    def close(self) -> None:
        """Stop after the queued frames are written."""
        ...

    def abort(self, reason: str = "") -> None:
        """Close at once, dropping queued frames."""
        ...

    async def wait_closed(self) -> None:
        """Wait until the link is closed."""
        ...


def limit_socket_buffering(writer: ByteWriter, chunk_bytes: int) -> None:
    """Keep about one chunk in the transport and one unsent in the kernel.

    The transport's high-water mark is one chunk, so `drain()` waits as soon as a chunk
    did not fit into the socket. TCP_NOTSENT_LOWAT makes the socket writable only while
    fewer than `chunk_bytes` bytes are unsent (bytes in flight on the network are not
    limited, so throughput on a fast link does not suffer). A socket without the option
    (not TCP, or another OS) keeps only the transport limit: still bounded, by the
    kernel's send buffer. Over TLS `writer.transport` is asyncio's TLS layer (its limit
    counts bytes encrypted but not yet handed on); the TCP transport beneath it got the
    same one-chunk limit when qim/net/tls.py upgraded the connection, and the socket
    option reaches the TCP socket through the TLS transport's extra info. On a TLS
    listener's connection `writer` is a ClientLink (qim/net/link.py, link_server.py): its
    transport is the TCP one itself, limited when accepted, and the socket inherited the
    option from its listener (`buffering_limited`: nothing to do per connection). Rule:
    docs/decisions/0011-slow-links.md."""
    transport = writer.transport
    if transport is None or getattr(writer, "buffering_limited", False):
        return
    transport.set_write_buffer_limits(high=chunk_bytes, low=chunk_bytes // 4)
    limit_unsent(writer.get_extra_info("socket"), chunk_bytes)


def limit_unsent(sock: Any, chunk_bytes: int) -> None:
    """TCP_NOTSENT_LOWAT = `chunk_bytes` on a TCP socket (on a listening one, every
    connection it accepts inherits it); nothing for another socket or OS."""
    lowat = getattr(socket, "TCP_NOTSENT_LOWAT", None)
    if sock is None or lowat is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, lowat, chunk_bytes)
    except OSError as exc:  # a capability probe: the transport limit above still applies
        logger.debug("TCP_NOTSENT_LOWAT unavailable: %s", exc.__class__.__name__)
