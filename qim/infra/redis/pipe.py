"""One pipelined Redis connection for batches of commands (docs/decisions/0068).

redis-py's asyncio pipeline costs about 17-24 µs of client CPU per command in a batch
of coalesced script calls (a pool checkout, a Pipeline object, a retry wrapper, a
timeout context and a response callback per command; docs/perf.md "Redis calls"); this
connection costs about 3 µs: commands are packed by hiredis, written in one `write`,
and the replies read by hiredis's Reader in `data_received`, in order. Batches from
many callers share the connection: Redis answers in the order it read them, so each
batch's replies are the next N replies.

Used for what the services send most (the coalesced script calls of
qim/stores/redis/scripts.py); everything else stays on redis-py, which keeps pools,
health checks and the full command set.

Errors are redis-py's classes, so the stores' one error table (qim/stores/redis/errors.py)
maps them as before: an error reply is an instance of the class redis-py would raise
(NoScriptError, BusyLoadingError, ...) returned in its slot; a connection that cannot
be opened, is lost or leaves a batch unanswered past its timeout (the client's
`socket_timeout`, else REDIS_PIPE_TIMEOUT_S) fails every batch in flight with
ConnectionError or TimeoutError (nothing is known of those commands: the caller repeats
them or reports the outcome unknown) and is replaced by a new one at the next batch. A
caller that is cancelled leaves its batch to be answered and dropped: the connection
stays in step.
"""

from __future__ import annotations

import asyncio
import collections
import socket
from typing import Any, Deque, Optional, Sequence

import hiredis
import redis.asyncio as aioredis
from redis import exceptions as rx
from redis._parsers.base import BaseParser

from qim.consts import REDIS_PIPE_TIMEOUT_S
from qim.infra.redis.client import HiredisPackedConnection, pack_args

CONNECT_TIMEOUT_S = 2.0


class _Batch:
    """A batch in flight: its future, the replies read so far and when it was sent."""

    __slots__ = ("fut", "want", "replies", "sent_at")

    def __init__(self, fut: asyncio.Future, want: int, sent_at: float) -> None:
        self.fut, self.want, self.sent_at = fut, want, sent_at
        self.replies: list = []


class _Protocol(asyncio.Protocol):
    """The connection's reading side: replies go to the oldest batch in flight. One timer
    per connection (not one per batch) watches the oldest batch: when it is older than
    `timeout_s` the connection fails."""

    def __init__(self, owner: "PipelinedRedis", timeout_s: float) -> None:
        self._owner = owner
        self._reader = hiredis.Reader(protocolError=rx.InvalidResponse, replyError=BaseParser.parse_error)
        self._timeout_s = timeout_s
        self._timer: Optional[asyncio.TimerHandle] = None
        self.transport: Optional[asyncio.Transport] = None
        self.inflight: Deque[_Batch] = collections.deque()
        self.lost: Optional[BaseException] = None

    def send(self, packed: bytes, want: int) -> asyncio.Future:
        """Write one batch; its future gets the `want` replies."""
        loop = asyncio.get_running_loop()
        batch = _Batch(loop.create_future(), want, loop.time())
        self.inflight.append(batch)
        self.transport.write(packed)  # type: ignore[union-attr]  # set by connection_made
        if self._timer is None:
            self._timer = loop.call_at(batch.sent_at + self._timeout_s, self._watch)
        return batch.fut

    def _watch(self) -> None:
        self._timer = None
        if not self.inflight:
            return
        due = self.inflight[0].sent_at + self._timeout_s
        loop = asyncio.get_running_loop()
        if loop.time() >= due:
            self.fail(rx.TimeoutError(f"no answer from Redis within {self._timeout_s} s"))
        else:
            self._timer = loop.call_at(due, self._watch)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        inflight = self.inflight
        try:
            while True:
                reply = self._reader.gets()
                if reply is False:
                    return
                if not inflight:
                    raise rx.InvalidResponse("a reply nobody asked for")
                batch = inflight[0]
                batch.replies.append(reply)
                if len(batch.replies) == batch.want:
                    inflight.popleft()
                    if not batch.fut.done():
                        batch.fut.set_result(batch.replies)
        except rx.InvalidResponse as exc:  # out of step with the server: nothing after it can be trusted
            self.fail(rx.ConnectionError(f"Redis protocol error: {exc}"))

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.fail(rx.ConnectionError(f"Redis connection lost: {exc or 'closed by the server'}"))

    def fail(self, exc: BaseException) -> None:
        """Fail every batch in flight with `exc` and close: the owner opens a new connection."""
        if self.lost is None:
            self.lost = exc
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self.inflight:
            batch = self.inflight.popleft()
            if not batch.fut.done():
                batch.fut.set_exception(exc)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()
        self._owner.forget(self)


class PipelinedRedis:
    """`await execute([args, ...])` -> one reply per command, in order; an error reply is
    the redis-py exception instance in its slot (never raised). Raises rx.ConnectionError
    (cannot connect, connection lost) or rx.TimeoutError (no complete answer within
    `timeout_s`), after which the connection is replaced; rx.DataError for an argument Redis cannot take (nothing sent).
    An empty batch is [] at once.
    `host`, `port`: a Redis without AUTH, TLS or a database number (the development and
    test engines; qim/stores/redis/scripts.py falls back to redis-py otherwise)."""

    def __init__(self, host: str, port: int, timeout_s: float = REDIS_PIPE_TIMEOUT_S,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        self._host, self._port = host, port
        self._timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._proto: Optional[_Protocol] = None
        self._connecting: Optional[asyncio.Future] = None

    def forget(self, proto: _Protocol) -> None:
        """`proto` failed: the next batch opens a new connection."""
        if self._proto is proto:
            self._proto = None

    async def _connection(self) -> _Protocol:
        proto = self._proto
        if proto is not None and proto.lost is None:
            return proto
        if self._connecting is None:  # one connect for every batch that waits for it
            self._connecting = asyncio.ensure_future(self._open())
            self._connecting.add_done_callback(self._opened)
        return await asyncio.shield(self._connecting)

    def _opened(self, fut: asyncio.Future) -> None:
        """The connect ended (whoever still waits for it): the next one starts afresh."""
        self._connecting = None
        if not fut.cancelled():
            fut.exception()  # read here too: every waiter may have been cancelled meanwhile

    async def _open(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                _, proto = await loop.create_connection(lambda: _Protocol(self, self._timeout_s), self._host,
                                                       self._port)
        except (OSError, asyncio.TimeoutError) as exc:
            raise rx.ConnectionError(f"cannot connect to Redis at {self._host}:{self._port}: {exc}") from None
        sock = proto.transport.get_extra_info("socket") if proto.transport is not None else None
        if sock is not None:  # a peer that vanished without a reset shows within minutes
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            except OSError:  # the connection is usable without it; the watchdog still bounds a batch
                pass
        self._proto = proto
        return proto

    async def execute(self, commands: Sequence[Sequence[Any]]) -> list:
        """Send `commands` (each a sequence of arguments, command name first) in one write."""
        if not commands:
            return []
        packed = b"".join(pack_args(c) for c in commands)  # DataError before anything is sent
        proto = await self._connection()
        if proto.lost is not None or proto.transport is None or proto.transport.is_closing():
            raise rx.ConnectionError(f"Redis connection lost: {proto.lost}")  # lost as it opened
        return await proto.send(packed, len(commands))  # a cancelled caller cancels only its batch's future

    def close(self) -> None:
        """Close the connection (batches in flight fail with ConnectionError)."""
        if self._proto is not None:
            self._proto.fail(rx.ConnectionError("closed"))


def pipe_for(client: Any) -> Optional[PipelinedRedis]:
    """A PipelinedRedis to the server of redis-py `client` with its timeouts, or None when
    the client's connections need what this one does not do (AUTH, TLS, a database
    number, a Unix socket, decoded replies, RESP3) or it has no such pool (a test double)."""
    pool = getattr(client, "connection_pool", None)
    kw = getattr(pool, "connection_kwargs", None)
    if not isinstance(kw, dict) or getattr(pool, "connection_class", None) not in (aioredis.Connection,
                                                                                 HiredisPackedConnection):
        return None  # a test double, an SSLConnection, a Unix socket
    if (kw.get("password") or kw.get("username") or kw.get("db", 0) or kw.get("credential_provider")
            or kw.get("decode_responses") or kw.get("protocol", 2) != 2):
        return None
    return PipelinedRedis(kw.get("host", "localhost"), kw.get("port", 6379),
                          kw.get("socket_timeout") or REDIS_PIPE_TIMEOUT_S,
                          kw.get("socket_connect_timeout") or CONNECT_TIMEOUT_S)
