"""Internal RPC between services: the frame codec over TCP (docs/design.md §4 last paragraph).

A request is one frame with a fresh request_id; the reply is one frame with the same
request_id (any opcode; ERROR carries `qim.v1.Error`). Connections are mutual TLS 1.3
(qim/net/tls.py): the client presents its service certificate and checks the server is
the service it meant to reach; the listener checks every frame against the allow-list
of qim/net/allow.py. Plaintext only for loopback development (no identity, no check).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Awaitable, Callable, Optional, Protocol

from qim.errors import ErrorCode, FrameError, RequestError
from qim.net.allow import OPEN, RpcGuard, opcode_label
from qim.net.framed import FramedStream, StreamClosed, open_framed
from qim.net.tls import HandshakeFailed, TlsContexts, describe
from qim.net.transport import ByteReader, ByteWriter
from qim.protocol import Opcode
from qim.wire.addr import parse_addr
from qim.wire.errors import RemoteError, error_body, parse_error

# error_body, parse_error and RemoteError are defined in qim/wire/errors.py; these names
# stay importable from here for older callers.
__all__ = ["Handler", "LinkFactory", "LinkHandler", "OnewayHandler", "RemoteError", "RpcClient", "RpcTimeout",
           "error_body", "parse_error", "rpc_connection_handler", "serve_rpc"]

logger = logging.getLogger(__name__)

Handler = Callable[[int, bytes], Awaitable[tuple[int, bytes]]]
REPLY_BACKLOG_BYTES = 32 * 1024 * 1024


class RpcTimeout(RequestError):
    """UNAVAILABLE: the peer was reached but did not answer within the call's timeout
    (paused, starved or overloaded; the request may still be applied later: callers
    retry idempotently, a router may try another node at once)."""


class RpcClient:
    """Multiplexed client to one service address ('host:port').

    `call(opcode, body, timeout)` -> (reply_opcode, reply_body) for any reply but ERROR.
    Raises RemoteError (a RequestError) when the peer answered ERROR, and RequestError
    with UNAVAILABLE when the peer cannot be reached or the connection drops before the
    reply, RpcTimeout (UNAVAILABLE too) when no reply came within `timeout` (either way
    the request may or may not have been applied: callers retry idempotently).
    An ERROR reply is never returned as data: its body names the internal opcode, and a
    caller forwarding it would show that opcode to a client (docs/protocol.md ERROR).
    `on_frame(opcode, body)`: frames the server sends on its own (request_id 0; dropped
    without it); `on_lost()`: a connection that was up ended, called before the next
    connection is made (a server whose state lives on the connection: the RoomWriter).
    `tls`: this process's internal TlsContexts (None: plaintext development);
    `expect_service`: the service the server's certificate must name (a TLS failure or a
    wrong service is UNAVAILABLE too, logged once per distinct reason).
    """

    def __init__(self, addr: str, connect_timeout: float = 2.0, tls: Optional[TlsContexts] = None,
                 expect_service: Optional[str] = None, on_frame: Optional[Callable[[int, bytes], None]] = None,
                 on_lost: Optional[Callable[[], None]] = None) -> None:
        self.addr = addr
        self._host, self._port = parse_addr(addr)
        self._timeout = connect_timeout
        # mutual TLS (None: plaintext development): each connect uses the current client
        # context (a reloaded certificate applies to the next connection); the server's
        # certificate must name `expect_service`
        self._tls = tls
        self._expect = expect_service
        self._last_failure = ""
        self._stream: Optional[FramedStream] = None
        self._reader_task: Optional[asyncio.Task] = None
        self._pending: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self._connect_lock = asyncio.Lock()
        self._on_frame, self._on_lost = on_frame, on_lost

    @property
    def connected(self) -> bool:
        """True while the connection is up (it may still drop before the next call)."""
        return self._stream is not None and not self._stream.closed

    async def _ensure(self) -> FramedStream:
        async with self._connect_lock:
            if self._stream is None or self._stream.closed:
                if self._reader_task is not None and not self._reader_task.done():
                    # the old connection's end (on_lost) comes before the new connection
                    if self._stream is not None:
                        self._stream.abort()
                    await asyncio.gather(self._reader_task, return_exceptions=True)
                self._stream = await self._open()
                self._reader_task = asyncio.get_running_loop().create_task(self._read_loop(self._stream))
            return self._stream

    async def _open(self) -> FramedStream:
        context = self._tls.client if self._tls is not None else None
        try:
            stream = await open_framed(self._host, self._port, self._timeout, tls=context)
        except HandshakeFailed as exc:
            raise self._failed(f"{self.addr}: {exc}") from exc
        except (OSError, asyncio.TimeoutError) as exc:
            raise RequestError(ErrorCode.UNAVAILABLE, f"{self.addr} unreachable") from exc
        except Exception as exc:  # noqa: BLE001 — any failure of one connect is UNAVAILABLE (decision 0073)
            # e.g. a transport closed under the connect (uvloop's RuntimeError): the caller
            # retries or tries another node, as for an unreachable peer; logged with its class
            raise self._failed(f"{self.addr}: connect failed: {type(exc).__name__}: {exc}") from exc
        if context is not None and self._expect is not None and stream.peer_service != self._expect:
            stream.abort()
            raise self._failed(f"{self.addr} presented the certificate of service {stream.peer_service!r}, "
                               f"not {self._expect!r}")
        self._last_failure = ""
        return stream

    def _failed(self, why: str) -> RequestError:
        """A TLS failure: logged once per distinct reason (links retry several times a second)."""
        if why != self._last_failure:
            logger.error("%s", why)
            self._last_failure = why
        return RequestError(ErrorCode.UNAVAILABLE, why)

    async def _read_loop(self, stream: FramedStream) -> None:
        try:
            while True:
                item = await stream.read_frame()
                if item is None:
                    break
                opcode, request_id, body = item
                if request_id == 0:
                    if self._on_frame is not None:
                        try:
                            self._on_frame(opcode, body)
                        except Exception:  # a bad frame must not end the connection
                            logger.exception("frame 0x%04x from %s could not be handled", opcode, self.addr)
                    continue
                fut = self._pending.pop(request_id, None)
                if fut is not None and not fut.done():
                    fut.set_result((opcode, body))
        except (FrameError, ConnectionError, OSError) as exc:
            # over TLS 1.3 a listener that refuses our certificate says so only after the
            # handshake: its alert surfaces here (describe() names it)
            logger.warning("rpc stream to %s failed: %s", self.addr, describe(exc))
        finally:
            stream.abort()
            pending, self._pending = self._pending, {}
            for fut in pending.values():
                if not fut.done():
                    fut.set_exception(RequestError(ErrorCode.UNAVAILABLE, f"connection to {self.addr} lost"))
            if self._on_lost is not None:
                try:
                    self._on_lost()
                except Exception:
                    logger.exception("on_lost of the connection to %s failed", self.addr)

    async def call(self, opcode: int, body: bytes, timeout: float = 10.0) -> tuple[int, bytes]:
        """One request -> (reply_opcode, reply_body); see the class doc for the errors.
        `timeout` (s) bounds the whole call, a connect it has to make or wait for included:
        a connect that never ends is RpcTimeout here, never a call waiting for ever
        (docs/decisions/0151)."""
        stream = self._stream
        if stream is None or stream.closed:
            try:
                stream = await asyncio.wait_for(self._ensure(), timeout)
            except asyncio.TimeoutError as exc:
                raise RpcTimeout(ErrorCode.UNAVAILABLE, f"{self.addr}: no connection in {timeout}s") from exc
        request_id = next(self._ids) & 0xFFFFFFFF or next(self._ids)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending[request_id] = fut
        try:
            stream.send(opcode, request_id, body)
        except StreamClosed as exc:
            self._pending.pop(request_id, None)
            raise RequestError(ErrorCode.UNAVAILABLE, f"connection to {self.addr} lost") from exc
        try:
            reply_opcode, reply = await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError as exc:
            self._pending.pop(request_id, None)
            raise RpcTimeout(ErrorCode.UNAVAILABLE, f"{self.addr} did not answer in {timeout}s") from exc
        if reply_opcode == Opcode.ERROR:
            raise parse_error(reply)
        return reply_opcode, reply

    @property
    def queued_bytes(self) -> int:
        """Bytes queued on the connection but not yet written (0 when not connected)."""
        return self._stream.queued_bytes if self._stream is not None else 0

    def send_oneway(self, opcode: int, body: bytes) -> None:
        """Queue a frame that gets no reply (request_id 0). Raises StreamClosed when not connected."""
        if self._stream is None or self._stream.closed:
            raise StreamClosed(f"not connected to {self.addr}")
        self._stream.send(opcode, 0, body)

    async def connect(self) -> None:
        """Connect now (RequestError UNAVAILABLE on failure)."""
        await self._ensure()

    async def wait_lost(self, timeout: Optional[float]) -> None:
        """Return once the current connection is lost (at once when there is none), or
        after `timeout` seconds (None: no limit)."""
        task = self._reader_task
        if task is not None and not task.done() and self.connected:
            await asyncio.wait([task], timeout=timeout)

    async def close(self) -> None:
        """Drop the connection (pending calls fail with UNAVAILABLE) and await the reader."""
        if self._stream is not None:
            self._stream.abort()
        if self._reader_task is not None:
            await asyncio.gather(self._reader_task, return_exceptions=True)


OnewayHandler = Callable[[int, bytes], Awaitable[None]]


class LinkHandler(Protocol):
    """The handler of one connection, for a service whose state belongs to the caller's
    connection (the RoomWriter: a gateway's connection is its subscription)."""

    async def handle(self, opcode: int, body: bytes) -> tuple[int, bytes]:
        """One request of this connection -> (reply_opcode, reply_body), as a Handler."""
        ...

    def closed(self) -> None:
        """The connection ended (every request of it has finished)."""
        ...


LinkFactory = Callable[[FramedStream], LinkHandler]


def rpc_connection_handler(handler: Optional[Handler], inflight_limit: int, on_oneway: Optional[OnewayHandler] = None,
                           guard: RpcGuard = OPEN, links: Optional[LinkFactory] = None
                           ) -> Callable[[ByteReader, ByteWriter], Awaitable[None]]:
    """The per-connection coroutine of an internal RPC listener (for
    `asyncio.start_server` or qim.obs.node.ServiceNode.listen).

    `handler(opcode, body)` -> (reply_opcode, reply_body); a raised RequestError becomes
    an ERROR frame with the request's id, any other exception an ERROR(INTERNAL). At
    most `inflight_limit` requests per connection run at once; past that the server
    stops reading the socket (TCP back-pressure, nothing dropped), and it stops reading
    too while more than REPLY_BACKLOG_BYTES of replies wait for a peer that does not read
    them. Frames with request_id 0 go to `on_oneway` (no reply). `guard` checks each
    frame against the peer certificate's service (qim/net/allow.py): a refused request
    gets ERROR(FORBIDDEN) with its id, a refused one-way frame is dropped (both counted by
    the guard); the handler never sees either. With `links`, each connection gets its own
    handler `links(stream)` (LinkHandler; `handler` unused): the service may send frames
    of its own on `stream` (request_id 0), and hears `closed()` when it ends."""

    async def on_conn(reader: ByteReader, writer: ByteWriter) -> None:
        stream = FramedStream(reader, writer)
        permits = asyncio.Semaphore(inflight_limit)
        tasks: set[asyncio.Task] = set()
        link = links(stream) if links is not None else None
        serve = link.handle if link is not None else handler
        assert serve is not None, "rpc_connection_handler needs a handler or links"

        async def run(opcode: int, request_id: int, body: bytes) -> None:
            try:
                reply_opcode, reply = await serve(opcode, body)
            except RequestError as exc:  # a retry hint (a held send: docs/decisions/0099) goes along
                reply_opcode, reply = Opcode.ERROR, error_body(exc.code, exc.message, opcode,
                                                               getattr(exc, "retry_after_ms", 0))
            except Exception:
                logger.exception("internal handler failed for opcode 0x%04x", opcode)
                reply_opcode, reply = Opcode.ERROR, error_body(ErrorCode.INTERNAL, "internal error", opcode)
            finally:
                permits.release()
            if not stream.closed:
                stream.send(reply_opcode, request_id, reply)

        peer = stream.peer_service
        try:
            while True:
                await stream.wait_writable(REPLY_BACKLOG_BYTES)  # a peer not reading replies is not read
                item = await stream.read_frame()
                if item is None:
                    break
                opcode, request_id, body = item
                if not guard.allows(opcode, peer):
                    if request_id:
                        stream.send(Opcode.ERROR, request_id, error_body(
                            ErrorCode.FORBIDDEN, f"service {peer} may not call {opcode_label(opcode)}", opcode))
                    continue
                if request_id == 0:
                    if on_oneway is not None:
                        await on_oneway(opcode, body)
                    continue
                await permits.acquire()
                task = asyncio.get_running_loop().create_task(run(opcode, request_id, body))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except (FrameError, ConnectionError, OSError) as exc:
            logger.warning("internal peer %s dropped: %s", stream.peer, exc.__class__.__name__)
        finally:
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            stream.close()
            if link is not None:
                link.closed()

    return on_conn


async def serve_rpc(host: str, port: int, handler: Handler, inflight_limit: int,
                    on_oneway: Optional[OnewayHandler] = None) -> asyncio.AbstractServer:
    """Serve plaintext internal RPC on host:port with `rpc_connection_handler` (a
    listener the caller closes; tests). Services use ServiceNode.serve_rpc: TLS, the
    allow-list, tracked connections."""
    return await asyncio.start_server(rpc_connection_handler(handler, inflight_limit, on_oneway), host, port)
