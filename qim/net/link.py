"""Accepted connections without asyncio streams or the loop's TLS layer: one ClientLink
per connection of every TLS listener, the gateway's client port and the internal ones
(qim/net/link_server.py; docs/decisions/0050-conn-lean-client-links.md: what an idle
connection costs; 0119: the one TLS path).

A ClientLink is the asyncio protocol of the accepted TCP transport and does TLS 1.3
(server side) itself with `ssl.SSLObject` over two `MemoryBIO`s (its TLS side and the
LinkListener protocol: qim/net/link_tls.py); above, it is the
ByteReader and ByteWriter (qim/net/transport.py) FramedStream and the WebSocket upgrade
use. It keeps no stream objects, no TLS-layer buffer and no received bytes while nothing
waits: every read lands in one scratch buffer of the process (`_SCRATCH`: a read is
consumed, into the TLS layer or as bytes, before the loop reads anything else).

Behaviour kept from the streams it replaces:
- writes are encrypted at once and handed to the TCP transport, whose write-buffer
  limit is about one chunk: `drain()` waits while more is buffered (decision 0011);
- reading stops (TCP back-pressure) while more than READ_HIGH_BYTES were received and
  not read, and resumes below READ_LOW_BYTES;
- `close()` sends close_notify after what was written and waits (at most
  SHUTDOWN_TIMEOUT_S, reading and dropping) for the peer's before closing TCP, so the
  last frames are not destroyed by a reset; `abort()` closes at once;
- a handshake slower than the listener's timeout is aborted; a refusal reaches
  `listener.link_refused(link, exc)` (`qim.net.tls.handshake_failure` names it), a
  finished handshake `listener.link_ready(link)`. No asyncio error ever holds a link (a
  lost connection raises a fresh ConnectionResetError), so reference counting frees it
  when it closes (docs/decisions/0029-edge-connections-freed-when-they-close.md).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any, Optional, Union, cast

from qim.net.link_tls import CLOSED, CLOSING, HANDSHAKE, OPEN, LinkListener, LinkTls

READ_HIGH_BYTES = 256 * 1024
READ_LOW_BYTES = 64 * 1024
SHUTDOWN_TIMEOUT_S = 5.0
_SCRATCH = memoryview(bytearray(64 * 1024))  # what the transport reads into (module doc)


class ClientLink(LinkTls, asyncio.BufferedProtocol):
    """One accepted connection (module doc; its TLS side: qim/net/link_tls.py).
    Reader side: `read(n)`. Writer side: `write`, `drain`, `close`, `abort`,
    `is_closing`, `wait_closed`, `get_extra_info`, `transport` (the TCP transport, None
    once lost)."""

    buffering_limited = True  # qim/net/transport.py limit_socket_buffering: done at accept

    # the connection's and the TLS side's slots are LinkTls's
    __slots__ = ("_rbuf", "_reader", "_drainer", "_closed", "_write_paused", "_read_paused")

    def __init__(self, listener: LinkListener) -> None:
        self._listener = listener
        self._raw: Optional[asyncio.Transport] = None
        self._tls: Optional[ssl.SSLObject] = None
        self._in: Optional[ssl.MemoryBIO] = None
        self._out: Optional[ssl.MemoryBIO] = None
        self._state = HANDSHAKE
        self._timer: Optional[asyncio.TimerHandle] = None
        self._rbuf: Union[bytes, bytearray, None] = None  # received, not yet read
        self._reader: Optional[asyncio.Future] = None
        self._drainer: Optional[asyncio.Future] = None
        self._closed: Optional[asyncio.Future] = None
        self._write_paused = self._read_paused = self._eof = self._draining = False
        self._lost: Optional[str] = None  # why the connection was lost, once it was

    # --- the transport's side
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Set the one-chunk write-buffer limit; start TLS (or serve at once on plaintext)."""
        raw = self._raw = cast(asyncio.Transport, transport)  # a socket transport (uvloop's is no subclass)
        chunk = self._listener.chunk_bytes
        raw.set_write_buffer_limits(high=chunk, low=chunk // 4)
        context = self._listener.context()
        if context is None:
            self._state = OPEN
            self._listener.link_ready(self)
            return
        self._in, self._out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._in, self._out, server_side=True)
        self._timer = asyncio.get_running_loop().call_later(self._listener.handshake_timeout, self._too_slow)

    def get_buffer(self, sizehint: int) -> memoryview:
        """The process's scratch buffer: every read is consumed before the next (module doc)."""
        return _SCRATCH

    def buffer_updated(self, nbytes: int) -> None:
        """`nbytes` read into the scratch buffer: to the TLS layer, or to the reader on plaintext."""
        if self._tls is None:
            self._deliver(bytes(_SCRATCH[:nbytes]))
            return
        self._in.write(_SCRATCH[:nbytes])  # type: ignore[union-attr]
        if self._state == HANDSHAKE:
            self._handshake()
        elif self._state == OPEN:
            self._decrypt()
        elif self._state == CLOSING and not self._draining:
            self._shutdown()

    def eof_received(self) -> bool:
        """The peer closed its side: the reader sees the end; the transport closes (False)."""
        if self._state == HANDSHAKE:
            self._refuse(ConnectionResetError("the peer closed the connection during the TLS handshake"))
        self._eof = True
        self._wake_reader()
        return False  # the transport closes: a TLS peer that half-closed is gone

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        """The connection is gone: refusal if still in the handshake, then every waiter wakes."""
        if self._state == HANDSHAKE:
            self._state = CLOSING
            self._cancel_timer()
            self._listener.link_refused(self, ConnectionResetError(
                f"connection lost during the TLS handshake: {type(exc).__name__}" if exc
                else "connection closed during the TLS handshake"))
        self._state = CLOSED
        self._lost = type(exc).__name__ if exc is not None else "closed"
        self._raw = None
        self._cancel_timer()
        self._wake_reader()
        for fut in (self._drainer, self._closed):
            if fut is not None and not fut.done():
                fut.set_result(None)

    def pause_writing(self) -> None:
        """The TCP transport holds more than one chunk: `drain()` waits."""
        self._write_paused = True

    def resume_writing(self) -> None:
        """Below the low-water mark again: a waiting `drain()` returns."""
        self._write_paused = False
        if self._drainer is not None and not self._drainer.done():
            self._drainer.set_result(None)

    # --- the reader's side
    def _deliver(self, data: bytes) -> None:
        if self._rbuf is None:
            self._rbuf = data
        else:
            if isinstance(self._rbuf, bytes):
                self._rbuf = bytearray(self._rbuf)
            self._rbuf += data
        self._wake_reader()
        if not self._read_paused and len(self._rbuf) > READ_HIGH_BYTES and self._raw is not None:
            self._read_paused = True
            self._raw.pause_reading()

    def _wake_reader(self) -> None:
        if self._reader is not None and not self._reader.done():
            self._reader.set_result(None)

    async def read(self, n: int = -1) -> bytes:
        """Up to `n` bytes (all buffered when n < 0), waiting for some; b"" at the end.
        ConnectionResetError (a new one each time) when the connection was lost with
        nothing left to read."""
        while self._rbuf is None:
            if self._eof or self._state == CLOSED:
                if self._lost not in (None, "closed") and not self._eof:
                    raise ConnectionResetError(f"connection lost: {self._lost}")
                return b""
            self._reader = asyncio.get_running_loop().create_future()
            try:
                await self._reader
            finally:
                self._reader = None
        buf = self._rbuf
        if n < 0 or n >= len(buf):
            self._rbuf = None
            data = bytes(buf) if isinstance(buf, bytearray) else buf
        else:
            data, self._rbuf = bytes(buf[:n]), bytearray(buf[n:])
        if self._read_paused and (self._rbuf is None or len(self._rbuf) <= READ_LOW_BYTES):
            self._read_paused = False
            if self._raw is not None:
                self._raw.resume_reading()
        return data

    # --- the writer's side
    @property
    def transport(self) -> Optional[asyncio.Transport]:
        """The TCP transport (its write-buffer limits are the link's), None once lost."""
        return self._raw

    def write(self, data: Union[bytes, bytearray, memoryview]) -> None:
        """Encrypt (TLS) and hand `data` to the TCP transport; dropped once closing, as a
        closing asyncio transport drops it."""
        if self._state != OPEN or self._raw is None or self._raw.is_closing():
            return
        if self._tls is None:
            self._raw.write(data)
            return
        try:
            self._tls.write(data)
        except ssl.SSLError as exc:
            self._lost = f"TLS error: {exc.reason or type(exc).__name__}"
            self.abort()
            return
        self._flush()

    async def drain(self) -> None:
        """Wait while the TCP transport holds more than about one chunk.
        ConnectionResetError once the connection is lost."""
        if self._raw is None:
            raise ConnectionResetError(f"connection lost: {self._lost}")
        if self._raw.is_closing():
            await asyncio.sleep(0)  # let connection_lost come first, as StreamWriter.drain does
        while self._write_paused and self._raw is not None:
            self._drainer = asyncio.get_running_loop().create_future()
            try:
                await self._drainer
            finally:
                self._drainer = None
        if self._raw is None:
            raise ConnectionResetError(f"connection lost: {self._lost}")

    def is_closing(self) -> bool:
        """True once close() or abort() was called or the connection was lost."""
        return self._state != OPEN or self._raw is None or self._raw.is_closing()

    def close(self) -> None:
        """Close after what was written: close_notify, the peer's, then TCP (module doc)."""
        if self._state != OPEN or self._raw is None:
            return
        self._state = CLOSING
        if self._tls is None or self._raw.is_closing():
            self._raw.close()
            return
        self._timer = asyncio.get_running_loop().call_later(SHUTDOWN_TIMEOUT_S, self.abort)
        self._shutdown()

    def abort(self) -> None:
        """Close at once (whatever is buffered is dropped)."""
        if self._state == OPEN:
            self._state = CLOSING
        if self._raw is not None:
            self._raw.abort()

    async def wait_closed(self) -> None:
        """Wait until the connection is closed."""
        if self._state == CLOSED:
            return
        if self._closed is None:
            self._closed = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._closed)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """As a transport's: "ssl_object" (the SSLObject: ALPN, version), "peercert"
        (the verified client certificate of mutual TLS; None on the client port, which asks for none), "sslcontext", else the TCP transport's
        ("peername", "socket", ...; `default` once lost)."""
        if name == "ssl_object":
            return self._tls
        if name == "peercert":
            return self._tls.getpeercert() if self._tls is not None and self._state != HANDSHAKE else default
        if name == "sslcontext":
            return self._tls.context if self._tls is not None else default
        return self._raw.get_extra_info(name, default) if self._raw is not None else default
