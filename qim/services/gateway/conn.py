"""One client connection of the ConnectionNode (docs/design.md §4, §5.1).

Frame faults close the connection at once (no resync). Request faults get an ERROR
frame with the request's id. Validation happens here before anything reaches a writer;
the actor identity comes from AUTH, never from a request body. At most
`inflight_limit` requests per connection are in progress; past that the connection
stops reading (TCP back-pressure; nothing is dropped).

Memory per connection is bounded for a slow reader (docs/decisions/0011-slow-links.md): the connection
stops reading while more than REPLY_BACKLOG_BYTES of replies wait for the socket, and
paged replies (mailbox, history, members, session list) are fetched at most
BULK_INFLIGHT at a time and only while the backlog has room, so a device that pipelines
pulls gets its pages at the pace it reads them.

AUTH (docs/decisions/0021-tokens-and-limits.md): a refused AUTH (UNAUTHENTICATED: auth.py; RATE_LIMITED past the
per-user connection cap: online.py) is answered and the connection closed. An accepted
connection lives until its token's exp (+ leeway): then it gets KICKED{TOKEN_EXPIRED}
and is closed (the client reconnects with a fresh token). Mutating requests pass the
connection's and the user's token buckets first (ratelimit.py: RATE_LIMITED with
retry_after_ms; a backend's "not now" answer gives the tokens back; AUTH_OK tells the
client the limit).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from functools import partial
from typing import TYPE_CHECKING, Any, Callable, Optional

from qim.errors import ErrorCode, FrameError, RequestError
from qim.net.transport import FrameTransport
from qim.obs.logcontext import bind
from qim.proto.v1 import connection_pb2, internal_pb2
from qim.protocol import INTERNAL_CATEGORY, Opcode
from qim.services.gateway.login import LoginMixin
from qim.services.gateway.metrics import opcode_name
from qim.services.gateway.pages import PageReplies
from qim.services.gateway.ratelimit import LIMITED_OPCODES, NOT_NOW
from qim.services.gateway.routes import RESERVED, ROUTES, Route, RouteKey, forward
from qim.wire.errors import error_body, parse_error

if TYPE_CHECKING:
    from qim.services.gateway.context import GatewayContext

logger = logging.getLogger(__name__)

# Replies queued for one connection above which it is not read (back-pressure). A page
# is up to ~1.5 MiB (512 KiB budget, first entry always whole), so one fits.
REPLY_BACKLOG_BYTES = 2 * 1024 * 1024
BULK_INFLIGHT = 2  # paged replies fetched at once per connection
BULK_OPS = frozenset(op for op, route in ROUTES.items() if route.bulk)
# Chunk size toward clients: a PONG waits behind at most ~one chunk in the gateway's
# socket buffers (qim/net/framed.py), 0.5 s at 30 KiB/s.
CLIENT_CHUNK_BYTES = 16 * 1024
PRE_AUTH_BUFFER_BYTES = 256 * 1024  # an AUTH frame is tiny; anonymous peers hold no more
_CONN_IDS = itertools.count(1)


class ClientConnection(LoginMixin):
    """Serves one client link until it closes; `run()` returns when done. `stream` is
    any FrameTransport (qim/net/transport.py: TCP or TLS, WebSocket): the transport is a
    detail below this class, so AUTH, limits, rate buckets, back-pressure and chunking
    are the same on every one.

    `gateway` is the GatewayContext (context.py): the ConnectionNode, or a unit test's
    stand-in built from the same parts (tests/gateway/standin.py)."""

    def __init__(self, stream: FrameTransport, gateway: GatewayContext) -> None:
        self.stream = stream
        self.gw = gateway
        self._m = gateway.metrics
        self._authn = gateway.auth
        self._limiter = gateway.limiter
        self._bucket = self._limiter.conn_bucket()
        self._expiry: Optional[asyncio.TimerHandle] = None
        self.tenant = 0
        self.user_id = 0
        self.device_id = 0
        self.token_iat = 0  # the token's iat (unix s): revoked when at or before a cutoff (revocation.py)
        self.display_name = ""  # the token's `name` claim, carried in the Actor (docs/protocol.md "Names")
        self.shard = 0
        self.lane = 0  # the device's mailbox lane (AUTH_OK mailbox_lane): pushes carry it
        self.session_epoch = 0  # of this login (SessionEpochStore; docs/decisions/0042-scale-presence.md)
        self.replaced = False  # kicked by a newer session of its device: publishes no logout
        self._permits = asyncio.Semaphore(gateway.config.inflight_limit)
        self._bulk = asyncio.Semaphore(BULK_INFLIGHT)
        self._pages = PageReplies(stream, self._m)  # compressed pages, repeats behind the first copy (0087)
        stream.buffer_limit = PRE_AUTH_BUFFER_BYTES  # lifted by a successful AUTH
        self._tasks: set[asyncio.Task] = set()
        self._wake_task: Optional[asyncio.Task] = None
        self.conn_id = next(_CONN_IDS)  # this connection within the gateway (never reused)
        self._locals = gateway.locals  # LocalBackend by backend (routes.py)
        self.heartbeat_s = gateway.config.heartbeat_s  # told in AUTH_OK and PONG (keepalive.py)
        self.last_rx = time.monotonic()  # when a frame was read last: keepalive.py
        self._queued_seen = 0  # queued_bytes at the last silent_s(): a drop means the peer read

    # DeviceConn protocol (online.OnlineRegistry)
    def send(self, opcode: int, request_id: int, body: bytes) -> None:
        """Queue one frame to the device (StreamClosed when the stream is closed)."""
        self.stream.send(opcode, request_id, body)

    def kick(self) -> None:
        """Close after the queued frames (a newer login replaced this one)."""
        self.replaced = True
        self.stream.close()

    def silent_s(self, now: float) -> float:
        """Seconds (time.monotonic `now`) since this connection last showed it is alive: a
        frame read, or its peer taking queued bytes since the previous call (it is not
        read while it does not read its replies). keepalive.py, decision 0077."""
        queued = self.stream.queued_bytes
        if queued < self._queued_seen:
            self.last_rx = now
        self._queued_seen = queued
        return now - self.last_rx

    def reap(self, reason: str) -> None:
        """Close a silent connection at once (its path is dead: nothing queued can
        arrive) and free its registration now; presence hears of it when run() ends.
        Counted in qim_gateway_silent_closed{reason} (keepalive.py)."""
        self._m.silent_closed.labels(reason=reason).inc()
        if self.user_id:
            self.gw.online.unregister(self)
        self.stream.abort(f"silent ({reason})")

    def revoked(self) -> None:
        """Its token was revoked (revocation.py): KICKED{REVOKED}, then close."""
        if self.stream.closed:
            return
        self.stream.send(Opcode.KICKED, 0, connection_pb2.Kicked(reason=connection_pb2.Kicked.REVOKED).SerializeToString())
        self.stream.close()

    def wake_when_drained(self, limit: int, wake: Callable[[Any], None]) -> None:
        """Call `wake(self)` once the outbound queue is at or below `limit` bytes (a push
        was dropped because it was fuller: the device must still learn to pull). One
        pending wake-up per connection; later drops fold into it."""
        if self._wake_task is None or self._wake_task.done():
            self._wake_task = asyncio.get_running_loop().create_task(self._wake_after_drain(limit, wake))
            self._tasks.add(self._wake_task)
            self._wake_task.add_done_callback(self._tasks.discard)

    async def _wake_after_drain(self, limit: int, wake: Callable[[Any], None]) -> None:
        await self.stream.wait_writable(limit)
        if not self.stream.closed:
            wake(self)

    @property
    def queued_bytes(self) -> int:
        """Outbound bytes not yet handed to the socket."""
        return self.stream.queued_bytes

    def actor(self) -> internal_pb2.Actor:
        """The authenticated identity this connection's requests carry to the backends."""
        return internal_pb2.Actor(tenant_id=self.tenant.to_bytes(16, "big"), user_id=self.user_id,
                                  device_id=self.device_id, display_name=self.display_name,
                                  token_iat=self.token_iat)  # a revoked token's sends are refused (0080)

    async def run(self) -> None:
        """Read and serve requests until EOF, a frame fault or the AUTH timeout."""
        loop = asyncio.get_running_loop()
        auth_deadline = loop.time() + self.gw.config.auth_timeout_s
        try:
            while True:
                # a client that does not read its replies stops being read (back-pressure)
                await self.stream.wait_writable(REPLY_BACKLOG_BYTES)
                if self.user_id:
                    item = await self.stream.read_frame()
                else:  # an unauthenticated connection has QIM_AUTH_TIMEOUT_MS to authenticate
                    # (a deadline, not wait_for: its inner task would keep a FrameError whose
                    # traceback holds that task, a cycle freed only by a full collection)
                    async with asyncio.timeout_at(auth_deadline):
                        item = await self.stream.read_frame()
                if item is None:
                    break
                self.last_rx = time.monotonic()
                opcode, request_id, body = item
                self._m.requests.labels(opcode=f"0x{opcode:04x}").inc()
                await self._permits.acquire()
                if opcode == Opcode.AUTH:  # inline: the identity is known before the next read
                    await self._serve(opcode, request_id, body)
                    if not self.user_id:
                        break  # refused: the ERROR goes out, then the close (finally)
                    # the device cannot speak before AUTH_OK reaches it: its silence counts
                    # from the reply, not from its AUTH (an admission wait, a slow path; 0077)
                    self.last_rx = time.monotonic()
                    continue
                task = asyncio.get_running_loop().create_task(self._serve(opcode, request_id, body))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        except FrameError as exc:
            self._m.frame_faults.labels(kind=type(exc).__name__).inc()
            logger.info("closing %s: %s", self.stream.peer, type(exc).__name__)
            self.stream.abort(f"bad frame: {type(exc).__name__}")
        except asyncio.TimeoutError:  # before OSError: TimeoutError is one (it was caught there and never counted)
            self._m.auth_timeouts.inc()
            self.stream.abort("no AUTH in time")
        except (ConnectionError, OSError):
            pass
        finally:
            if self._expiry is not None:
                self._expiry.cancel()
            for t in list(self._tasks):
                t.cancel()
            if self.user_id:
                self.gw.online.unregister(self)
                if self.gw.presence is not None and not self.replaced:
                    self.gw.presence.offline(self)
                for local in self._locals.values():
                    local.closed(self)
            self.stream.close()

    async def _serve(self, opcode: int, request_id: int, body: bytes) -> None:
        try:
            if opcode in BULK_OPS and self.user_id:
                await self._pages.defer_repeat(opcode, body)
                async with self._bulk:
                    # fetch a page only while this connection's queue has room for it
                    await self.stream.wait_writable(REPLY_BACKLOG_BYTES)
                    await self._answer(opcode, request_id, body)
            else:
                await self._answer(opcode, request_id, body)
        finally:
            self._permits.release()

    async def _answer(self, opcode: int, request_id: int, body: bytes) -> None:
        """Run one request and queue its reply (or ERROR naming the client's opcode),
        timed in qim_gateway_request_seconds{opcode=NAME}."""
        started = time.perf_counter()
        with bind(op=opcode_name(opcode), rid=request_id):
            reply_opcode, reply = await self._reply(opcode, request_id, body)
        if reply_opcode and not self.stream.closed:
            self._pages.send(opcode, body, request_id, reply_opcode, reply)
        self._m.request_seconds.labels(opcode=opcode_name(opcode)).observe(time.perf_counter() - started)

    async def _reply(self, opcode: int, request_id: int, body: bytes) -> tuple[int, bytes]:
        try:
            if request_id == 0:
                # 0 marks server-initiated frames: a reply with id 0 would look like a push
                raise RequestError(ErrorCode.INVALID_ARGUMENT, "request_id 0 is reserved for server frames")
            reply_opcode, reply = await self._dispatch(opcode, body)
            if reply_opcode == Opcode.ERROR:
                # a backend's ERROR body names its internal opcode: rebuild it for this request
                raise parse_error(reply)
        except RequestError as exc:
            self._m.request_errors.labels(code=exc.code.name).inc()
            reply_opcode, reply = Opcode.ERROR, error_body(exc.code, exc.message, opcode,
                                                           getattr(exc, "retry_after_ms", 0))
        except Exception:
            logger.exception("request 0x%04x failed", opcode)
            self._m.request_errors.labels(code="INTERNAL").inc()
            reply_opcode, reply = Opcode.ERROR, error_body(ErrorCode.INTERNAL, "internal error", opcode)
        return reply_opcode, reply

    async def _dispatch(self, opcode: int, body: bytes) -> tuple[int, bytes]:
        if opcode == Opcode.PING:
            return Opcode.PONG, connection_pb2.Pong(server_time_ms=time.time_ns() // 1_000_000,
                                                    heartbeat_s=self.heartbeat_s).SerializeToString()
        if opcode == Opcode.AUTH:
            return await self._auth(body)
        if (opcode >> 8) == INTERNAL_CATEGORY:
            raise RequestError(ErrorCode.FORBIDDEN, "internal opcode")
        if not self.user_id:
            raise RequestError(ErrorCode.UNAUTHENTICATED, "AUTH first")
        route = ROUTES.get(opcode)
        if route is None:
            if opcode in RESERVED:
                raise RequestError(ErrorCode.INVALID_ARGUMENT, f"opcode 0x{opcode:04x} not supported yet")
            raise RequestError(ErrorCode.INVALID_ARGUMENT, f"unknown opcode 0x{opcode:04x}")
        if opcode not in LIMITED_OPCODES:
            return await self._forward(route, route.check(self, body), opcode, body)
        self._limiter.admit((self.tenant, self.user_id), self._bucket)
        key = route.check(self, body)
        try:
            reply_opcode, reply = await self._forward(route, key, opcode, body)
        except RequestError as exc:
            if exc.code in NOT_NOW:
                self._limiter.refund((self.tenant, self.user_id), self._bucket)
            raise
        if reply_opcode == Opcode.ERROR and parse_error(reply).code in NOT_NOW:  # the retry is the one charged
            self._limiter.refund((self.tenant, self.user_id), self._bucket)
        return reply_opcode, reply

    async def _forward(self, route: Route, key: RouteKey, opcode: int, body: bytes) -> tuple[int, bytes]:
        call = partial(forward, self.gw.router, route, key, self.actor(), opcode, body, self.conn_id)
        local = self._locals.get(route.backend)
        if local is not None:  # a backend with state per connection (rooms: routes.py LocalBackend)
            return await local.request(self, opcode, key, body, call)
        return await call()
