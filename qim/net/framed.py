"""The TCP transport: QIM frames as a byte stream over TCP or TLS (docs/design.md §4;
the FrameTransport of qim/net/transport.py).

Reading: bytes go through `qim._core.frame.FrameDecoder`; a FrameError propagates and
the caller closes the stream (there is no resync).

Writing: the chunks go out in the order of qim/net/chunks.py (control replies first,
other frames round-robin), so that a PONG or an ACK never waits behind a large frame;
small ones queued together leave in one write of at most a chunk (one system call and
one TLS record). The frames queued in one turn of the event loop are written by one
callback later in that turn; only when the socket holds a chunk back does a task wait
for it (`drain()`), so an idle link keeps neither a task nor an event
(docs/decisions/0050-conn-lean-client-links.md). It hands the socket the next chunk only
when the previous one left user space (asyncio write-buffer limits of about one chunk),
and asks the kernel to keep at most about one chunk unsent (TCP_NOTSENT_LOWAT). Before
this, a whole page (up to 1 MiB) went to the socket at once and a PONG queued after it
waited ~9 s on a 100 KiB/s link (docs/decisions/0011-slow-links.md). What a slow peer
has not taken yet stays queued, counted in `queued_bytes`; callers bound it (stop
reading the peer, drop best-effort traffic with a counter).

FramedStream is also the base of the WebSocket transport (qim/net/websocket.py), which
runs over the same asyncio stream and replaces only how bytes become frames and chunks
become bytes (`_decode`, `_at_eof`, `_ended`, `_emit`, `_closing`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import ssl
from typing import Deque, Optional

from qim._core import frame as frame_codec
from qim.consts import MAX_FRAME_BODY, STREAM_WRITE_CHUNK_BYTES
from qim.errors import FrameTooLarge, TruncatedFrame
from qim.net.chunks import MAX_OPEN_MULTI, URGENT_OPCODES, ChunkQueue
from qim.net.dial import open_stream
from qim.net.tls import peer_service, selected_alpn
from qim.net.transport import ByteReader, ByteWriter, StreamClosed, limit_socket_buffering, release
from qim.wire.addr import parse_addr

# parse_addr: qim/wire/addr.py; StreamClosed, release: qim/net/transport.py; open_stream: qim/net/dial.py
# (imported from here by callers)
__all__ = ["MAX_OPEN_MULTI", "URGENT_OPCODES", "FramedStream", "StreamClosed", "open_framed", "open_stream",
           "parse_addr", "release"]

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

    def __init__(self, reader: ByteReader, writer: ByteWriter,
                 max_frame: int = MAX_FRAME_BODY, chunk_bytes: int = STREAM_WRITE_CHUNK_BYTES) -> None:
        if not 0 < chunk_bytes <= STREAM_WRITE_CHUNK_BYTES:
            raise ValueError(f"chunk_bytes must be 1..{STREAM_WRITE_CHUNK_BYTES}")
        self._reader = reader
        self._writer = writer
        self._chunk_bytes = chunk_bytes
        self._decoder = frame_codec.FrameDecoder(max_frame)
        self._ready: Optional[Deque[tuple[int, int, bytes]]] = None  # decoded, not yet returned (module doc)
        self._out = ChunkQueue(chunk_bytes)
        self._pump_task: Optional[asyncio.Task] = None  # only while the socket holds a chunk back
        self._pump_soon: Optional[asyncio.Handle] = None  # the write of the frames queued this turn
        self._waiters: Optional[list[asyncio.Future]] = None  # woken whenever queued_bytes shrinks or on close
        self._done: Optional[asyncio.Future] = None  # wait_closed()'s
        self._closed = False  # no more send()
        self._finished = False  # the writing side ended: the socket is closing
        self.buffer_limit: Optional[int] = None
        limit_socket_buffering(writer, chunk_bytes)

    @property
    def queued_bytes(self) -> int:
        """Outbound bytes queued and not yet handed to the socket."""
        return self._out.queued_bytes

    def sending(self, opcode: int, request_id: int) -> bool:
        """True while chunks of that non-urgent frame wait to be handed to the socket."""
        return self._out.holds(opcode, request_id)

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

    def _emit(self, chunks: list[bytes]) -> None:
        """Hand chunks to the socket, in one write."""
        self._writer.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))

    def _closing(self, reason: str) -> None:
        """Last bytes before a clean close (none on TCP; `reason` is empty then)."""

    def _push_ready(self, frames: list[tuple[int, int, bytes]]) -> None:
        """Frames decoded ahead of the reader (more than one per read)."""
        if frames:
            if self._ready is None:
                self._ready = collections.deque(frames)
            else:
                self._ready.extend(frames)

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
            frames = self._decode(data)
            if not frames and self._ended():
                return None
            if self.buffer_limit is not None and self._decoder.buffered > self.buffer_limit:
                raise FrameTooLarge(f"more than {self.buffer_limit} bytes of partial frames held")
            if len(frames) == 1 and not self._ready:
                return frames[0]  # the usual read: one frame, nothing held
            self._push_ready(frames)
        frame = self._ready.popleft()
        if not self._ready:
            self._ready = None  # an idle link holds no deque
        return frame

    def send(self, opcode: int, request_id: int, body: bytes, compress: bool = False) -> None:
        """Queue one frame. Raises StreamClosed after close(); FrameTooLarge for > 4 MiB."""
        if self._closed:
            raise StreamClosed("stream is closed")
        self._out.put(opcode, request_id, body, compress)
        if self._pump_task is None and self._pump_soon is None and not self._finished:
            # later in this turn of the loop, so frames queued together share the link
            # round-robin (decision 0011) instead of the first one going out whole
            self._pump_soon = asyncio.get_running_loop().call_soon(self._pump_now)

    # --- writing (module doc): chunks go out as soon as the socket takes them; a task
    # exists only while it holds one back, so an idle link has none
    def _pump_now(self) -> None:
        self._pump_soon = None
        self._pump()

    def _pump(self) -> None:
        if self._pump_task is not None or self._finished:
            return
        try:
            while not self._writer.is_closing():
                chunks = self._out.next_chunks(self._chunk_bytes)
                if not chunks:
                    break
                self._emit(chunks)
                transport = self._writer.transport
                if transport is not None and transport.get_write_buffer_size() > 0:
                    self._pump_task = asyncio.get_running_loop().create_task(self._pump_when_writable())
                    return
            else:
                self._finish(clean=False)  # lost or aborted under this stream
                return
        except (ConnectionError, OSError) as exc:
            self._broken(exc)
            return
        finally:
            self._progressed()
        if self._closed:
            self._finish(clean=True)

    async def _pump_when_writable(self) -> None:
        try:
            while True:
                # Returns at once unless the transport holds more than about one chunk:
                # then it waits for the socket, and whatever is queued meanwhile (a PONG)
                # is chosen afresh instead of sitting behind bytes already handed over.
                await self._writer.drain()
                chunks = self._out.next_chunks(self._chunk_bytes) if not self._writer.is_closing() else None
                if not chunks:
                    break
                self._emit(chunks)
                self._progressed()
        except (ConnectionError, OSError) as exc:
            self._pump_task = None
            self._broken(exc)
            return
        self._pump_task = None
        if self._writer.is_closing() and not self._finished:
            self._finish(clean=False)
        elif self._out:  # queued after the last drain: the socket takes it, or a new task waits
            self._pump()
        elif self._closed:
            self._finish(clean=True)
        self._progressed()

    def _broken(self, exc: BaseException) -> None:
        logger.debug("write to %s failed: %s", self.peer, exc.__class__.__name__)
        release(exc)
        self._finish(clean=False)

    def _finish(self, clean: bool) -> None:
        """The writing side ends: the last bytes of a clean close, then the socket closes."""
        if self._finished:
            return
        self._finished = self._closed = True
        self._out.clear()
        if self._pump_soon is not None:
            self._pump_soon.cancel()
            self._pump_soon = None
        if clean:
            self._closing("")
        if not self._writer.is_closing():  # a second close() of asyncio's TLS transport drops its extra info
            self._writer.close()
        self._progressed()
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    def _progressed(self) -> None:
        waiters, self._waiters = self._waiters, None
        for fut in waiters or ():
            if not fut.done():
                fut.set_result(None)

    async def _progress(self) -> None:
        fut = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(fut)
        await fut

    async def wait_writable(self, limit: int) -> None:
        """Wait while more than `limit` bytes are queued (a reader's back-pressure point:
        stop reading requests from a peer that does not read its replies)."""
        while self._out.queued_bytes > limit and not self._closed:
            await self._progress()

    async def flush(self) -> None:
        """Wait until every queued frame was handed to the socket."""
        while (self._out or self._pump_task is not None or self._pump_soon is not None) and not self._finished:
            await self._progress()
        if not self._writer.is_closing():
            try:
                await self._writer.drain()
            except (ConnectionError, OSError) as exc:
                raise StreamClosed(str(exc)) from release(exc)

    def close(self) -> None:
        """Stop after the queued frames are written (then the socket closes)."""
        self._closed = True
        if self._pump_task is None and self._pump_soon is None:
            self._finish(clean=True)  # nothing is held back: everything was handed over
        self._progressed()

    def abort(self, reason: str = "") -> None:
        """Close at once, dropping queued frames (used on frame faults and kills; TCP has
        no way to tell the peer `reason`)."""
        self._closed = True
        self._out.clear()
        if self._pump_soon is not None:
            self._pump_soon.cancel()
            self._pump_soon = None
        transport = self._writer.transport
        if transport is not None:
            transport.abort()
        self._finish(clean=False)

    async def wait_closed(self) -> None:
        """Wait until the writing side ended and the socket is closed."""
        if not self._finished:
            if self._done is None:
                self._done = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._done)
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError) as exc:
            release(exc)


async def open_framed(host: str, port: int, timeout: float = 5.0, tls: Optional[ssl.SSLContext] = None,
                      server_hostname: Optional[str] = None,
                      chunk_bytes: int = STREAM_WRITE_CHUNK_BYTES) -> FramedStream:
    """Connect to host:port (qim/net/dial.py `open_stream`) and wrap the stream. Raises OSError
    (ssl.SSLError for a failed handshake) / asyncio.TimeoutError."""
    reader, writer = await open_stream(host, port, timeout, tls, server_hostname, chunk_bytes)
    try:
        return FramedStream(reader, writer, chunk_bytes=chunk_bytes)
    except BaseException:  # e.g. the transport closed under us (uvloop's RuntimeError): nothing stays open
        writer.transport.abort()
        raise
