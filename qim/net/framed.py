"""The TCP transport: QIM frames as a byte stream over TCP or TLS (docs/design.md §4;
the FrameTransport of qim/net/transport.py).

Reading: bytes go through `qim._core.frame.FrameDecoder`; a FrameError propagates and
the caller closes the stream (there is no resync).

Writing: a single writer task takes the chunks one at a time in the order of
qim/net/chunks.py (control replies first, other frames round-robin), so that a PONG or an
ACK never waits behind a large frame. It hands the socket the next chunk only when the
previous one left user space (asyncio write-buffer limits of about one chunk, then
`drain()`), and asks the kernel to keep at most about one chunk unsent
(TCP_NOTSENT_LOWAT). Before this, a whole page (up to 1 MiB) went to the socket at once
and a PONG queued after it waited ~9 s on a 100 KiB/s link
(docs/decisions/0011-slow-links.md). What a slow peer has not taken yet stays queued,
counted in `queued_bytes`; callers bound it (stop reading the peer, drop best-effort
traffic with a counter).

FramedStream is also the base of the WebSocket transport (qim/net/websocket.py), which
runs over the same asyncio stream and replaces only how bytes become frames and chunks
become bytes (`_decode`, `_at_eof`, `_ended`, `_emit`, `_closing`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import ssl
from typing import Deque, Optional

from qim._core import frame as frame_codec
from qim.consts import MAX_FRAME_BODY, STREAM_WRITE_CHUNK_BYTES
from qim.errors import FrameTooLarge, TruncatedFrame
from qim.net.chunks import MAX_OPEN_MULTI, URGENT_OPCODES, ChunkQueue
from qim.net.tls import connect as tls_connect
from qim.net.tls import peer_service, selected_alpn
from qim.net.transport import ByteReader, StreamClosed, release
from qim.wire.addr import parse_addr

# parse_addr: qim/wire/addr.py; StreamClosed, release: qim/net/transport.py (imported from here by callers)
__all__ = ["MAX_OPEN_MULTI", "URGENT_OPCODES", "FramedStream", "StreamClosed", "open_framed", "parse_addr",
           "release"]

logger = logging.getLogger(__name__)

READ_SIZE = 256 * 1024


class FramedStream:
    """Frames over an asyncio (reader, writer) pair: the FrameTransport of
    qim/net/transport.py (its doc gives every method's contract).

    `chunk_bytes` (1..64 KiB) is the chunk size of frames this side sends: smaller
    chunks let control replies overtake sooner on slow links (the gateway uses 16 KiB
    toward clients); it also sizes the socket buffering described in the module doc.
    `buffer_limit` caps the bytes of partial frames held (the gateway sets a small one
    until AUTH so an anonymous peer cannot park megabytes of chunks).
    """

    def __init__(self, reader: ByteReader, writer: asyncio.StreamWriter,
                 max_frame: int = MAX_FRAME_BODY, chunk_bytes: int = STREAM_WRITE_CHUNK_BYTES) -> None:
        if not 0 < chunk_bytes <= STREAM_WRITE_CHUNK_BYTES:
            raise ValueError(f"chunk_bytes must be 1..{STREAM_WRITE_CHUNK_BYTES}")
        self._reader = reader
        self._writer = writer
        self._chunk_bytes = chunk_bytes
        self._decoder = frame_codec.FrameDecoder(max_frame)
        self._ready: Deque[tuple[int, int, bytes]] = collections.deque()
        self._out = ChunkQueue(chunk_bytes)
        self._wakeup = asyncio.Event()
        self._progress = asyncio.Event()  # set whenever queued_bytes shrinks or the stream closes
        self._closed = False
        self.buffer_limit: Optional[int] = None
        _limit_socket_buffering(writer, chunk_bytes)
        self._writer_task = asyncio.get_running_loop().create_task(self._write_loop())

    @property
    def queued_bytes(self) -> int:
        """Outbound bytes queued and not yet handed to the socket."""
        return self._out.queued_bytes

    @property
    def peer(self) -> str:
        """'host:port' of the peer ('?' when unknown): for log lines."""
        peer = self._writer.get_extra_info("peername")
        return f"{peer[0]}:{peer[1]}" if peer else "?"

    @property
    def peer_service(self) -> Optional[str]:
        """The service named by the peer's verified certificate (qim/net/tls.py), None on
        plaintext or without such a name."""
        return peer_service(self._writer)

    @property
    def alpn(self) -> Optional[str]:
        """The ALPN protocol the TLS handshake selected (None on plaintext or without one)."""
        return selected_alpn(self._writer)

    @property
    def closed(self) -> bool:
        """True once closed locally or by the peer (send() raises StreamClosed)."""
        return self._closed

    # --- how bytes become frames and chunks become bytes (the WebSocket transport overrides)
    def _decode(self, data: bytes) -> list[tuple[int, int, bytes]]:
        """The whole frames `data` completes (FrameError on a bad stream)."""
        return self._decoder.feed(data)

    def _at_eof(self) -> None:
        """The peer's bytes ended: TruncatedFrame when that was inside a frame."""
        if not self._decoder.at_boundary():
            raise TruncatedFrame("stream ended inside a frame")

    def _ended(self) -> bool:
        """True once the peer said it is done before its bytes ended (never on TCP)."""
        return False

    def _emit(self, chunk: bytes) -> None:
        """Hand one chunk to the socket."""
        self._writer.write(chunk)

    def _closing(self, reason: str) -> None:
        """Last bytes before a clean close (none on TCP; `reason` is empty then)."""

    async def read_frame(self) -> Optional[tuple[int, int, bytes]]:
        """The next whole frame (opcode, request_id, body), or None on a clean EOF.
        Raises FrameError (no resync), TruncatedFrame on EOF inside a frame, FrameTooLarge
        past `buffer_limit`, StreamClosed when the connection broke."""
        while not self._ready:
            if self._closed:
                return None
            try:
                data = await self._reader.read(READ_SIZE)
            except (ConnectionError, OSError) as exc:
                raise StreamClosed(f"read failed: {type(exc).__name__}") from release(exc)
            if not data:
                self._at_eof()
                return None
            self._ready.extend(self._decode(data))
            if not self._ready and self._ended():
                return None
            if self.buffer_limit is not None and self._decoder.buffered > self.buffer_limit:
                raise FrameTooLarge(f"more than {self.buffer_limit} bytes of partial frames held")
        return self._ready.popleft()

    def send(self, opcode: int, request_id: int, body: bytes, compress: bool = False) -> None:
        """Queue one frame. Raises StreamClosed after close(); FrameTooLarge for > 4 MiB."""
        if self._closed:
            raise StreamClosed("stream is closed")
        self._out.put(opcode, request_id, body, compress)
        self._wakeup.set()

    async def _write_loop(self) -> None:
        try:
            while True:
                chunk = self._out.next_chunk()
                if chunk is None:
                    if self._closed:
                        break
                    self._progress.set()  # idle: flush() waiters see every frame handed over
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                self._emit(chunk)
                self._progress.set()
                # Returns at once unless the transport holds more than about one chunk:
                # then it waits for the socket, and whatever is queued meanwhile (a PONG)
                # is chosen afresh instead of sitting behind bytes already handed over.
                await self._writer.drain()
            self._closing("")
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            logger.debug("write to %s failed: %s", self.peer, exc.__class__.__name__)
            release(exc)
        finally:
            self._closed = True
            self._out.clear()
            self._progress.set()
            self._writer.close()

    async def wait_writable(self, limit: int) -> None:
        """Wait while more than `limit` bytes are queued (a reader's back-pressure point:
        stop reading requests from a peer that does not read its replies)."""
        while self._out.queued_bytes > limit and not self._closed:
            self._progress.clear()
            await self._progress.wait()

    async def flush(self) -> None:
        """Wait until every queued frame was handed to the socket."""
        while self._out and not self._writer_task.done():
            self._progress.clear()
            await self._progress.wait()
        if not self._writer.is_closing():
            try:
                await self._writer.drain()
            except (ConnectionError, OSError) as exc:
                raise StreamClosed(str(exc)) from release(exc)

    def close(self) -> None:
        """Stop after the queued frames are written (the writer task closes the socket)."""
        self._closed = True
        self._wakeup.set()
        self._progress.set()

    def abort(self, reason: str = "") -> None:
        """Close at once, dropping queued frames (used on frame faults and kills; TCP has
        no way to tell the peer `reason`)."""
        self._closed = True
        self._out.clear()
        self._wakeup.set()
        self._progress.set()
        transport = self._writer.transport
        if transport is not None:
            transport.abort()

    async def wait_closed(self) -> None:
        """Wait until the writer task ended and the socket is closed."""
        await asyncio.shield(self._writer_task)
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError) as exc:
            release(exc)


def _limit_socket_buffering(writer: asyncio.StreamWriter, chunk_bytes: int) -> None:
    """Keep about one chunk in the transport and one unsent in the kernel.

    The transport's high-water mark is one chunk, so `drain()` waits as soon as a chunk
    did not fit into the socket. TCP_NOTSENT_LOWAT makes the socket writable only while
    fewer than `chunk_bytes` bytes are unsent (bytes in flight on the network are not
    limited, so throughput on a fast link does not suffer). A socket without the option
    (not TCP, or another OS) keeps only the transport limit: still bounded, by the
    kernel's send buffer. Over TLS `writer.transport` is asyncio's TLS layer (its limit
    counts bytes encrypted but not yet handed on); the TCP transport beneath it got the
    same one-chunk limit when qim/net/tls.py upgraded the connection, and the socket
    option reaches the TCP socket through the TLS transport's extra info."""
    transport = writer.transport
    if transport is None:
        return
    transport.set_write_buffer_limits(high=chunk_bytes, low=chunk_bytes // 4)
    sock = writer.get_extra_info("socket")
    lowat = getattr(socket, "TCP_NOTSENT_LOWAT", None)
    if sock is None or lowat is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, lowat, chunk_bytes)
    except OSError as exc:  # a capability probe: the transport limit above still applies
        logger.debug("TCP_NOTSENT_LOWAT unavailable: %s", exc.__class__.__name__)


async def open_stream(host: str, port: int, timeout: float, tls: Optional[ssl.SSLContext] = None,
                      server_hostname: Optional[str] = None, chunk_bytes: int = STREAM_WRITE_CHUNK_BYTES
                      ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A TCP connection to host:port, upgraded to TLS with `tls` (qim/net/tls.py
    `connect`: the server certificate verified by the context against `server_hostname`,
    default `host`). Raises OSError (HandshakeFailed for a failed handshake) /
    asyncio.TimeoutError."""
    if tls is None:
        return await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    # the name checked against the certificate defaults to the host dialled
    return await tls_connect(host, port, tls, server_hostname=server_hostname or host, chunk_bytes=chunk_bytes,
                             timeout=timeout)


async def open_framed(host: str, port: int, timeout: float = 5.0, tls: Optional[ssl.SSLContext] = None,
                      server_hostname: Optional[str] = None,
                      chunk_bytes: int = STREAM_WRITE_CHUNK_BYTES) -> FramedStream:
    """Connect to host:port (`open_stream`) and wrap the stream. Raises OSError
    (ssl.SSLError for a failed handshake) / asyncio.TimeoutError."""
    reader, writer = await open_stream(host, port, timeout, tls, server_hostname, chunk_bytes)
    return FramedStream(reader, writer, chunk_bytes=chunk_bytes)
