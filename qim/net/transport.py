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

from typing import Optional, Protocol


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
