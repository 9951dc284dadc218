"""One TCP stream that speaks QIM frames (docs/design.md §4).

Reading: bytes go through `qim._core.frame.FrameDecoder`; a FrameError propagates and
the caller closes the stream (there is no resync).

Writing: each frame becomes its chunks and a single writer task sends them one chunk at
a time, so that a PONG or an ACK never waits behind a large frame:
- control replies (PONG, ERROR, SEND_ACK, AUTH_OK, KICKED; one chunk each) go before
  any other chunk; other frames share the link round-robin, chunk by chunk;
- the writer hands the socket the next chunk only when the previous one left user
  space (asyncio write-buffer limits of about one chunk, then `drain()`), and asks the
  kernel to keep at most about one chunk unsent (TCP_NOTSENT_LOWAT). Before this, a
  whole page (up to 1 MiB) went to the socket at once and a PONG queued after it waited
  ~9 s on a 100 KiB/s link (issue 10, fault 11; docs/decisions/0011-slow-links.md).
What a slow peer has not taken yet stays queued here, counted in `queued_bytes`; callers
bound it (stop reading the peer, drop best-effort traffic with a counter).
Frames to one peer with the same (opcode, request_id) are never interleaved: request ids
are unique per direction and server pushes (request_id 0) are queued as whole frames in
order.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import ssl
from typing import Deque, Iterator, Optional, Protocol

from qim._core import frame as frame_codec
from qim.consts import MAX_FRAME_BODY, STREAM_WRITE_CHUNK_BYTES
from qim.net.tls import connect as tls_connect
from qim.net.tls import peer_service
from qim.protocol import Opcode
from qim.wire.addr import parse_addr

__all__ = ["FramedStream", "StreamClosed", "open_framed", "parse_addr"]  # parse_addr: qim/wire/addr.py

logger = logging.getLogger(__name__)

READ_SIZE = 256 * 1024
MAX_OPEN_MULTI = 8  # multi-chunk frames interleaved at once (receivers allow 16 open)
# Replies that a peer's liveness probe or send path waits for: sent before bulk chunks.
URGENT_OPCODES = frozenset({Opcode.PONG, Opcode.ERROR, Opcode.SEND_ACK, Opcode.AUTH_OK, Opcode.KICKED})


class StreamClosed(ConnectionError):
    """The stream was closed locally or by the peer."""


class ByteReader(Protocol):
    """What FramedStream reads from: an asyncio.StreamReader or a wrapper of one (the
    SDK's connection counts the bytes it receives)."""

    async def read(self, n: int = -1) -> bytes:
        """Up to `n` bytes; b"" at EOF."""
        ...


class FramedStream:
    """Frames over an asyncio (reader, writer) pair.

    `read_frame()` -> (opcode, request_id, body) or None on a clean EOF; raises
    qim.errors.FrameError on a bad stream and TruncatedFrame on EOF inside a frame.
    `send(opcode, request_id, body)` queues a frame and returns at once; `queued_bytes`
    tells how much is waiting (not yet handed to the socket) so callers can apply
    back-pressure (`wait_writable`) or drop best-effort traffic (with a counter).
    `chunk_bytes` (1..64 KiB) is the chunk size of frames this side sends: smaller
    chunks let control replies overtake sooner on slow links (the gateway uses 16 KiB
    toward clients); it also sizes the socket buffering described in the module doc.
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
        self._urgent: Deque[bytes] = collections.deque()  # single-chunk control replies
        # Round-robin of active frames. A frame waits in _pending while a frame with its
        # (opcode, request_id) key is active (two frames with one key never interleave)
        # or while MAX_OPEN_MULTI multi-chunk frames are open (every receiver refuses more
        # than 16 open reassemblies and would drop the whole connection).
        self._frames: Deque[tuple[tuple[int, int], Iterator[bytes], bool]] = collections.deque()
        self._active: set[tuple[int, int]] = set()
        self._pending: Deque[tuple[tuple[int, int], list[bytes]]] = collections.deque()
        self._open_multi = 0
        self._wakeup = asyncio.Event()
        self._progress = asyncio.Event()  # set whenever queued_bytes shrinks or the stream closes
        self._closed = False
        self.queued_bytes = 0
        # Optional cap on bytes held by the decoder (partial frames); the gateway sets a
        # small one until AUTH so an anonymous peer cannot park megabytes of chunks.
        self.buffer_limit: Optional[int] = None
        _limit_socket_buffering(writer, chunk_bytes)
        self._writer_task = asyncio.get_running_loop().create_task(self._write_loop())

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
        sslobj = self._writer.get_extra_info("ssl_object")
        return sslobj.selected_alpn_protocol() if sslobj is not None else None

    @property
    def closed(self) -> bool:
        """True once closed locally or by the peer (send() raises StreamClosed)."""
        return self._closed

    async def read_frame(self) -> Optional[tuple[int, int, bytes]]:
        """The next whole frame (opcode, request_id, body), or None on a clean EOF.
        Raises FrameError (no resync), TruncatedFrame on EOF inside a frame, FrameTooLarge
        past `buffer_limit`."""
        while not self._ready:
            if self._closed:
                return None
            data = await self._reader.read(READ_SIZE)
            if not data:
                if not self._decoder.at_boundary():
                    from qim.errors import TruncatedFrame

                    raise TruncatedFrame("stream ended inside a frame")
                return None
            self._ready.extend(self._decoder.feed(data))
            if self.buffer_limit is not None and self._decoder.buffered > self.buffer_limit:
                from qim.errors import FrameTooLarge

                raise FrameTooLarge(f"more than {self.buffer_limit} bytes of partial frames held")
        return self._ready.popleft()

    def send(self, opcode: int, request_id: int, body: bytes, compress: bool = False) -> None:
        """Queue one frame. Raises StreamClosed after close(); FrameTooLarge for > 4 MiB."""
        if self._closed:
            raise StreamClosed("stream is closed")
        chunks = frame_codec.encode_frame(opcode, request_id, body, compress, self._chunk_bytes)
        self.queued_bytes += sum(len(c) for c in chunks)
        key = (opcode, request_id)
        if (opcode in URGENT_OPCODES and len(chunks) == 1 and key not in self._active
                and all(k != key for k, _ in self._pending)):
            self._urgent.append(chunks[0])
        else:
            self._pending.append((key, chunks))
            self._activate()
        self._wakeup.set()

    def _activate(self) -> None:
        """Move pending frames into the round-robin, in arrival order per key."""
        blocked: set[tuple[int, int]] = set()
        keep: Deque = collections.deque()
        for key, chunks in self._pending:
            multi = len(chunks) > 1
            if key in self._active or key in blocked or (multi and self._open_multi >= MAX_OPEN_MULTI):
                blocked.add(key)
                keep.append((key, chunks))
                continue
            self._active.add(key)
            self._open_multi += multi
            self._frames.append((key, iter(chunks), multi))
        self._pending = keep

    def _next_chunk(self) -> Optional[bytes]:
        """The next chunk to write: urgent replies first, then round-robin; None when idle."""
        if self._urgent:
            return self._urgent.popleft()
        while self._frames:
            key, frame_chunks, multi = self._frames.popleft()
            chunk = next(frame_chunks, None)
            if chunk is None:
                self._active.discard(key)
                self._open_multi -= multi
                if self._pending:
                    self._activate()
                continue
            self._frames.append((key, frame_chunks, multi))
            return chunk
        return None

    async def _write_loop(self) -> None:
        try:
            while True:
                chunk = self._next_chunk()
                if chunk is None:
                    if self._closed:
                        break
                    self._progress.set()  # idle: flush() waiters see every frame handed over
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                self._writer.write(chunk)
                self.queued_bytes -= len(chunk)
                self._progress.set()
                # Returns at once unless the transport holds more than about one chunk:
                # then it waits for the socket, and whatever is queued meanwhile (a PONG)
                # is chosen afresh instead of sitting behind bytes already handed over.
                await self._writer.drain()
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            logger.debug("write to %s failed: %s", self.peer, exc.__class__.__name__)
        finally:
            self._closed = True
            self._urgent.clear()
            self._frames.clear()
            self._pending.clear()
            self._progress.set()
            self._writer.close()

    async def wait_writable(self, limit: int) -> None:
        """Wait while more than `limit` bytes are queued (a reader's back-pressure point:
        stop reading requests from a peer that does not read its replies)."""
        while self.queued_bytes > limit and not self._closed:
            self._progress.clear()
            await self._progress.wait()

    async def flush(self) -> None:
        """Wait until every queued frame was handed to the socket."""
        while (self._urgent or self._frames or self._pending) and not self._writer_task.done():
            self._progress.clear()
            await self._progress.wait()
        if not self._writer.is_closing():
            try:
                await self._writer.drain()
            except (ConnectionError, OSError) as exc:
                raise StreamClosed(str(exc)) from exc

    def close(self) -> None:
        """Stop after the queued frames are written (the writer task closes the socket)."""
        self._closed = True
        self._wakeup.set()
        self._progress.set()

    def abort(self) -> None:
        """Close at once, dropping queued frames (used on frame faults and kills)."""
        self._closed = True
        self._urgent.clear()
        self._frames.clear()
        self._pending.clear()
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
        except (ConnectionError, OSError):
            pass


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


async def open_framed(host: str, port: int, timeout: float = 5.0, tls: Optional[ssl.SSLContext] = None,
                      server_hostname: Optional[str] = None,
                      chunk_bytes: int = STREAM_WRITE_CHUNK_BYTES) -> FramedStream:
    """Connect to host:port and wrap the stream; with `tls`, upgrade to TLS first
    (qim/net/tls.py `connect`: the server certificate verified by the context, against
    `server_hostname`, default `host`, when the context checks host names). Raises OSError (ssl.SSLError
    for a failed handshake) / asyncio.TimeoutError."""
    if tls is None:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    else:  # the name checked against the certificate defaults to the host dialled
        reader, writer = await tls_connect(host, port, tls, server_hostname=server_hostname or host,
                                           chunk_bytes=chunk_bytes, timeout=timeout)
    return FramedStream(reader, writer, chunk_bytes=chunk_bytes)
