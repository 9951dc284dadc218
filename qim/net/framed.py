"""One TCP stream that speaks QIM frames (DESIGN.md §4).

Reading: bytes go through `qim._core.frame.FrameDecoder`; a FrameError propagates and
the caller closes the stream (there is no resync). Writing: each frame becomes its
chunks (<= 64 KiB) and a single writer task sends them round-robin across frames, so a
4 MiB frame never holds back a PONG or an ACK queued after it. Frames to one peer with
the same (opcode, request_id) are never interleaved because request ids are unique per
direction and server pushes (request_id 0) are queued as whole frames in order.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Deque, Iterator, Optional

from qim._core import frame as frame_codec
from qim.consts import MAX_FRAME_BODY, STREAM_WRITE_CHUNK_BYTES

logger = logging.getLogger(__name__)

READ_SIZE = 256 * 1024
# Above this many queued bytes the writer awaits drain(); it is the per-connection
# socket back-pressure point.
WRITE_HIGH_WATER = 1024 * 1024
MAX_OPEN_MULTI = 8  # multi-chunk frames interleaved at once (receivers allow 16 open)


class StreamClosed(ConnectionError):
    """The stream was closed locally or by the peer."""


class FramedStream:
    """Frames over an asyncio (reader, writer) pair.

    `read_frame()` -> (opcode, request_id, body) or None on a clean EOF; raises
    qim.errors.FrameError on a bad stream and TruncatedFrame on EOF inside a frame.
    `send(opcode, request_id, body)` queues a frame and returns at once; `queued_bytes`
    tells how much is waiting so callers can apply back-pressure or drop best-effort
    traffic (with a counter).
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 max_frame: int = MAX_FRAME_BODY) -> None:
        self._reader = reader
        self._writer = writer
        self._decoder = frame_codec.FrameDecoder(max_frame)
        self._ready: Deque[tuple[int, int, bytes]] = collections.deque()
        # Round-robin of active frames. A frame waits in _pending while a frame with its
        # (opcode, request_id) key is active (two frames with one key never interleave)
        # or while MAX_OPEN_MULTI multi-chunk frames are open (every receiver refuses more
        # than 16 open reassemblies and would drop the whole connection).
        self._frames: Deque[tuple[tuple[int, int], Iterator[bytes], bool]] = collections.deque()
        self._active: set[tuple[int, int]] = set()
        self._pending: Deque[tuple[tuple[int, int], list[bytes]]] = collections.deque()
        self._open_multi = 0
        self._wakeup = asyncio.Event()
        self._closed = False
        self.queued_bytes = 0
        # Optional cap on bytes held by the decoder (partial frames); the gateway sets a
        # small one until AUTH so an anonymous peer cannot park megabytes of chunks.
        self.buffer_limit: Optional[int] = None
        self._writer_task = asyncio.get_running_loop().create_task(self._write_loop())

    @property
    def peer(self) -> str:
        peer = self._writer.get_extra_info("peername")
        return f"{peer[0]}:{peer[1]}" if peer else "?"

    @property
    def closed(self) -> bool:
        return self._closed

    async def read_frame(self) -> Optional[tuple[int, int, bytes]]:
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
        chunks = frame_codec.encode_frame(opcode, request_id, body, compress, STREAM_WRITE_CHUNK_BYTES)
        self.queued_bytes += sum(len(c) for c in chunks)
        self._pending.append(((opcode, request_id), chunks))
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

    async def _write_loop(self) -> None:
        try:
            while True:
                if not self._frames:
                    if self._closed:
                        break
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                key, frame_chunks, multi = self._frames.popleft()
                chunk = next(frame_chunks, None)
                if chunk is None:
                    self._active.discard(key)
                    self._open_multi -= multi
                    if self._pending:
                        self._activate()
                    continue
                self._frames.append((key, frame_chunks, multi))
                self._writer.write(chunk)
                self.queued_bytes -= len(chunk)
                if self._writer.transport.get_write_buffer_size() > WRITE_HIGH_WATER:
                    await self._writer.drain()
            await self._writer.drain()
        except (ConnectionError, OSError) as exc:
            logger.debug("write to %s failed: %s", self.peer, exc.__class__.__name__)
        finally:
            self._closed = True
            self._frames.clear()
            self._pending.clear()
            self._writer.close()

    async def wait_writable(self, limit: int) -> None:
        """Wait while more than `limit` bytes are queued (a reader's back-pressure point:
        stop reading requests from a peer that does not read its replies)."""
        while self.queued_bytes > limit and not self._closed:
            await asyncio.sleep(0.005)

    async def flush(self) -> None:
        """Wait until every queued frame was handed to the socket."""
        while (self._frames or self._pending) and not self._writer_task.done():
            await asyncio.sleep(0.001)
        if not self._writer.is_closing():
            try:
                await self._writer.drain()
            except (ConnectionError, OSError) as exc:
                raise StreamClosed(str(exc)) from exc

    def close(self) -> None:
        """Stop after the queued frames are written (the writer task closes the socket)."""
        self._closed = True
        self._wakeup.set()

    def abort(self) -> None:
        """Close at once, dropping queued frames (used on frame faults and kills)."""
        self._closed = True
        self._frames.clear()
        self._pending.clear()
        self._wakeup.set()
        transport = self._writer.transport
        if transport is not None:
            transport.abort()

    async def wait_closed(self) -> None:
        await asyncio.shield(self._writer_task)
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass


async def open_framed(host: str, port: int, timeout: float = 5.0) -> FramedStream:
    """Connect to host:port and wrap the stream. Raises OSError / asyncio.TimeoutError."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    return FramedStream(reader, writer)


def parse_addr(addr: str) -> tuple[str, int]:
    """'host:port' -> (host, port); ValueError with the address on a bad form."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"bad address {addr!r}: expected host:port")
    return host.strip("[]"), int(port)
