"""The device session at the gateway (docs/decisions/0116 §3; issue 36 item 2).

A DeviceSession is one authenticated login of a device, apart from the connection
that carries its frames (Tinode's `session.go`, which any transport attaches to, is the
model). It owns what outlives one read loop:
- the identity of its AUTH (tenant, user, device, token iat, name, shard, lane) and the
  session_epoch of the login (decision 0042);
- its registrations: in the OnlineRegistry (online.py: pushes, kicks, the per-user cap),
  in presence (presence.py) and in the LocalBackends (rooms: backends/room.py), which
  all hold the session, not the connection;
- its in-flight requests: at most `inflight_limit` at once (a permit per request; the
  connection's read loop waits for one: TCP back-pressure, nothing dropped), BULK_INFLIGHT
  paged replies, the tasks that serve them, the token's expiry timer.

A connection (conn.py ClientConnection: a FrameTransport, framing, back-pressure and
silence) attaches to a session (`attach`) and hands it every frame it reads
(`receive`); replies and pushes go out through the attached connection (`stream`).
When the connection ends, its transport chooses: `end()` the session (TCP, TLS and
WebSocket: the session ends with its one connection, as it always did) or `detach()`
from it, which leaves the session registered for a later connection of the same
transport (an HTTP long-poll); a detached session counts as silent from the detach on
and is reaped by the keepalive sweep like a silent connection (keepalive.py,
decision 0077), which ends it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from functools import partial
from typing import Callable, Optional, Protocol

from qim.errors import ErrorCode, RequestError
from qim.net.transport import FrameTransport, StreamClosed
from qim.obs.logcontext import bind
from qim.proto.v1 import connection_pb2, internal_pb2
from qim.protocol import INTERNAL_CATEGORY, Opcode
from qim.services.gateway.context import GatewayContext
from qim.services.gateway.login import LoginMixin
from qim.services.gateway.metrics import opcode_name
from qim.services.gateway.online import DeviceConn
from qim.services.gateway.pages import PageReplies
from qim.services.gateway.ratelimit import LIMITED_OPCODES, NOT_NOW
from qim.services.gateway.routes import RESERVED, ROUTES, Route, RouteKey, forward
from qim.stores.bans import Ban
from qim.wire.errors import error_body, parse_error

logger = logging.getLogger(__name__)

# Replies queued for one connection above which it is not read (back-pressure). A page
# is up to ~1.5 MiB (512 KiB budget, first entry always whole), so one fits.
REPLY_BACKLOG_BYTES = 2 * 1024 * 1024
BULK_INFLIGHT = 2  # paged replies fetched at once per session
BULK_OPS = frozenset(op for op, route in ROUTES.items() if route.bulk)
_SESSION_IDS = itertools.count(1)


class SessionLink(Protocol):
    """What a DeviceSession uses of the connection attached to it (conn.py
    ClientConnection): its FrameTransport, its page-reply rules and its silence."""

    @property
    def stream(self) -> FrameTransport:
        """The connection's FrameTransport (frames out, back-pressure, close)."""
        ...

    @property
    def pages(self) -> PageReplies:
        """Page-reply rules of this connection (pages.py, decision 0087)."""
        ...

    def silent_s(self, now: float) -> float:
        """Seconds (time.monotonic `now`) since the connection last showed it is alive."""
        ...


class DeviceSession(LoginMixin):
    """One device's session at this gateway (module doc); `gateway` is the
    GatewayContext (context.py). `conn_id` names it within the gateway (never reused;
    the `connection` of a LocalBackend's envelope)."""

    def __init__(self, gateway: GatewayContext) -> None:
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
        self._tasks: set[asyncio.Task] = set()
        self._wake_task: Optional[asyncio.Task] = None
        self.conn_id = next(_SESSION_IDS)
        self._locals = gateway.locals  # LocalBackend by backend (routes.py)
        self.heartbeat_s = gateway.config.heartbeat_s  # told in AUTH_OK and PONG (keepalive.py)
        self.link: Optional[SessionLink] = None  # the connection carrying its frames now
        self._detached_at = time.monotonic()
        self.ended = False

    # --- connections
    def attach(self, link: SessionLink) -> None:
        """Carry this session's frames through `link` from now on (StreamClosed once ended)."""
        if self.ended:
            raise StreamClosed("the device session has ended")
        self.link = link

    def detach(self, link: SessionLink) -> None:
        """`link` ended and the session stays (a transport whose session outlives one
        connection); silent from now on (module doc). A no-op for another link."""
        if self.link is link:
            self.link = None
            self._detached_at = time.monotonic()

    @property
    def stream(self) -> FrameTransport:
        """The attached connection's FrameTransport; StreamClosed when none is attached."""
        if self.link is None:
            raise StreamClosed("no connection attached to the device session")
        return self.link.stream

    def end(self) -> None:
        """End the session (idempotent): its expiry timer and in-flight requests are
        cancelled; it leaves the OnlineRegistry, presence (unless a newer session of its
        device replaced it) and the LocalBackends. The attached connection is let go, not
        closed (no reference cycle keeps either: decision 0029)."""
        if self.ended:
            return
        self.ended = True
        self.link = None
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

    # --- DeviceConn protocol (online.OnlineRegistry: keepalive.py reaps through it), Revocable
    def send(self, opcode: int, request_id: int, body: bytes) -> None:
        """Queue one frame to the device (StreamClosed when no open connection carries it)."""
        self.stream.send(opcode, request_id, body)

    def kick(self) -> None:
        """Close after the queued frames (a newer login replaced this one)."""
        self.replaced = True
        if self.link is not None:
            self.link.stream.close()
        else:
            self.end()

    def silent_s(self, now: float) -> float:
        """Seconds since the device last showed it is alive: its connection's silence, or
        the time since the last one detached (decision 0077)."""
        return self.link.silent_s(now) if self.link is not None else now - self._detached_at

    def reap(self, reason: str) -> None:
        """Close a silent session's connection at once (its path is dead: nothing queued
        can arrive) and free its registration now; presence hears of it when the
        connection's read loop ends (a detached session ends here). Counted in
        qim_gateway_silent_closed{reason} (keepalive.py)."""
        self._m.silent_closed.labels(reason=reason).inc()
        if self.user_id:
            self.gw.online.unregister(self)
        if self.link is not None:
            self.link.stream.abort(f"silent ({reason})")
        else:
            self.end()

    def _token_expired(self) -> None:
        """The token's exp passed: KICKED{TOKEN_EXPIRED} and close (login.py), or, while
        detached, the session ends."""
        if self.link is None:
            self.end()
            return
        super()._token_expired()

    def revoked(self, ban: Optional[Ban] = None) -> None:
        """Its token was revoked (revocation.py): KICKED{REVOKED}, or KICKED{BANNED} with
        the operator's reason and the end for a moderation ban, then close (a detached
        session ends at once)."""
        if self.link is None:
            self.end()
            return
        if self.link.stream.closed:
            return
        kicked = (connection_pb2.Kicked(reason=connection_pb2.Kicked.BANNED, message=ban.reason, until_ms=ban.until_ms)
                  if ban is not None else connection_pb2.Kicked(reason=connection_pb2.Kicked.REVOKED))
        self.stream.send(Opcode.KICKED, 0, kicked.SerializeToString())
        self.stream.close()

    def wake_when_drained(self, limit: int, wake: Callable[[DeviceConn], None]) -> None:
        """Call `wake(self)` once the outbound queue is at or below `limit` bytes (a push
        was dropped because it was fuller: the device must still learn to pull). One
        pending wake-up per session; later drops fold into it."""
        if self._wake_task is None or self._wake_task.done():
            self._wake_task = asyncio.get_running_loop().create_task(self._wake_after_drain(limit, wake))
            self._tasks.add(self._wake_task)
            self._wake_task.add_done_callback(self._tasks.discard)

    async def _wake_after_drain(self, limit: int, wake: Callable[[DeviceConn], None]) -> None:
        await self.wait_writable(limit)
        if self.link is not None and not self.link.stream.closed:
            wake(self)

    async def wait_writable(self, limit: int) -> None:
        """Wait until at most `limit` bytes are queued toward the device (StreamClosed
        when no connection is attached)."""
        await self.stream.wait_writable(limit)

    @property
    def queued_bytes(self) -> int:
        """Outbound bytes not yet handed to the socket (0 while detached)."""
        return self.link.stream.queued_bytes if self.link is not None else 0

    def actor(self) -> internal_pb2.Actor:
        """The authenticated identity this session's requests carry to the backends."""
        return internal_pb2.Actor(tenant_id=self.tenant.to_bytes(16, "big"), user_id=self.user_id,
                                  device_id=self.device_id, display_name=self.display_name,
                                  token_iat=self.token_iat)  # a revoked token's sends are refused (0080)

    # --- requests
    async def receive(self, opcode: int, request_id: int, body: bytes) -> bool:
        """Serve one frame its connection read: AUTH inline (the identity is known before
        the next read), any other request in a task of the session once one of its
        `inflight_limit` permits is free (the caller does not read meanwhile). False when
        the session is still unauthenticated after an AUTH (refused: the connection
        closes after the ERROR)."""
        await self._permits.acquire()
        if opcode == Opcode.AUTH:
            await self._serve(opcode, request_id, body)
            return bool(self.user_id)
        task = asyncio.get_running_loop().create_task(self._serve(opcode, request_id, body))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _serve(self, opcode: int, request_id: int, body: bytes) -> None:
        try:
            if opcode in BULK_OPS and self.user_id:
                await self._link().pages.defer_repeat(opcode, body)
                async with self._bulk:
                    # fetch a page only while the connection's queue has room for it
                    await self.wait_writable(REPLY_BACKLOG_BYTES)
                    await self._answer(opcode, request_id, body)
            else:
                await self._answer(opcode, request_id, body)
        finally:
            self._permits.release()

    def _link(self) -> SessionLink:
        if self.link is None:
            raise StreamClosed("no connection attached to the device session")
        return self.link

    async def _answer(self, opcode: int, request_id: int, body: bytes) -> None:
        """Run one request and queue its reply (or ERROR naming the client's opcode),
        timed in qim_gateway_request_seconds{opcode=NAME}."""
        started = time.perf_counter()
        with bind(op=opcode_name(opcode), rid=request_id):
            reply_opcode, reply = await self._reply(opcode, request_id, body)
        link = self.link
        if reply_opcode and link is not None and not link.stream.closed:
            link.pages.send(opcode, body, request_id, reply_opcode, reply)
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
                                                           getattr(exc, "retry_after_ms", 0),  # RateLimited, LoginBusy
                                                           getattr(exc, "until_ms", 0))  # BannedRefusal
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
        if local is not None:  # a backend with state per session (rooms: routes.py LocalBackend)
            return await local.request(self, opcode, key, body, call)
        return await call()
