"""Internal RPC between services: the frame codec over TCP (DESIGN.md §4 last paragraph).

A request is one frame with a fresh request_id; the reply is one frame with the same
request_id (any opcode; ERROR carries `qim.v1.Error`). Plaintext is for loopback
development only; the production mTLS listener is not built yet (docs/status.md).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Awaitable, Callable, Optional

from qim.errors import ErrorCode, FrameError, RequestError
from qim.net.framed import FramedStream, StreamClosed, open_framed, parse_addr
from qim.proto.v1 import common_pb2
from qim.protocol import Opcode

logger = logging.getLogger(__name__)

Handler = Callable[[int, bytes], Awaitable[tuple[int, bytes]]]
REPLY_BACKLOG_BYTES = 32 * 1024 * 1024


def error_body(code: ErrorCode, message: str, request_opcode: int = 0) -> bytes:
    """Serialized `qim.v1.Error` for an ERROR frame."""
    return common_pb2.Error(code=int(code), message=message, request_opcode=request_opcode).SerializeToString()


class RemoteError(RequestError):
    """The peer answered with an ERROR frame: `code` and `message` are the peer's.

    It carries no opcode on purpose: whoever re-raises it to a client builds the ERROR
    body with the client's own request opcode (docs/protocol.md, ERROR)."""


def parse_error(body: bytes) -> RemoteError:
    """RemoteError from an ERROR body (INTERNAL when the body itself is unreadable)."""
    err = common_pb2.Error()
    try:
        err.ParseFromString(body)
        return RemoteError(ErrorCode(err.code), err.message)
    except Exception:  # a peer bug must still surface as an error, never vanish
        return RemoteError(ErrorCode.INTERNAL, "unreadable ERROR body")


class RpcClient:
    """Multiplexed client to one service address ('host:port').

    `call(opcode, body, timeout)` -> (reply_opcode, reply_body) for any reply but ERROR.
    Raises RemoteError (a RequestError) when the peer answered ERROR, and RequestError
    with UNAVAILABLE when the peer cannot be reached or the connection drops before the
    reply (the request may or may not have been applied: callers retry idempotently).
    An ERROR reply is never returned as data: its body names the internal opcode, and a
    caller forwarding it would show that opcode to a client (issue 10, fault 8).
    """

    def __init__(self, addr: str, connect_timeout: float = 2.0) -> None:
        self.addr = addr
        self._host, self._port = parse_addr(addr)
        self._timeout = connect_timeout
        self._stream: Optional[FramedStream] = None
        self._reader_task: Optional[asyncio.Task] = None
        self._pending: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self._connect_lock = asyncio.Lock()

    @property
    def connected(self) -> bool:
        return self._stream is not None and not self._stream.closed

    async def _ensure(self) -> FramedStream:
        async with self._connect_lock:
            if self._stream is None or self._stream.closed:
                try:
                    self._stream = await open_framed(self._host, self._port, self._timeout)
                except (OSError, asyncio.TimeoutError) as exc:
                    raise RequestError(ErrorCode.UNAVAILABLE, f"{self.addr} unreachable") from exc
                self._reader_task = asyncio.get_running_loop().create_task(self._read_loop(self._stream))
            return self._stream

    async def _read_loop(self, stream: FramedStream) -> None:
        try:
            while True:
                item = await stream.read_frame()
                if item is None:
                    break
                opcode, request_id, body = item
                fut = self._pending.pop(request_id, None)
                if fut is not None and not fut.done():
                    fut.set_result((opcode, body))
        except (FrameError, ConnectionError, OSError) as exc:
            logger.warning("rpc stream to %s failed: %s", self.addr, exc.__class__.__name__)
        finally:
            stream.abort()
            pending, self._pending = self._pending, {}
            for fut in pending.values():
                if not fut.done():
                    fut.set_exception(RequestError(ErrorCode.UNAVAILABLE, f"connection to {self.addr} lost"))

    async def call(self, opcode: int, body: bytes, timeout: float = 10.0) -> tuple[int, bytes]:
        stream = await self._ensure()
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
            raise RequestError(ErrorCode.UNAVAILABLE, f"{self.addr} did not answer in {timeout}s") from exc
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

    async def wait_lost(self, timeout: float) -> None:
        """Return once the current connection is lost (at once when there is none), or
        after `timeout` seconds."""
        task = self._reader_task
        if task is not None and not task.done() and self.connected:
            await asyncio.wait([task], timeout=timeout)

    async def close(self) -> None:
        if self._stream is not None:
            self._stream.abort()
        if self._reader_task is not None:
            await asyncio.gather(self._reader_task, return_exceptions=True)


async def serve_rpc(host: str, port: int, handler: Handler, inflight_limit: int,
                    on_oneway: Optional[Callable[[int, bytes], Awaitable[None]]] = None) -> asyncio.AbstractServer:
    """Serve internal RPC. `handler(opcode, body)` -> (reply_opcode, reply_body); a raised
    RequestError becomes an ERROR frame with the request's id, any other exception an
    ERROR(INTERNAL). At most `inflight_limit` requests per connection run at once; past
    that the server stops reading the socket (TCP back-pressure, nothing dropped).
    Frames with request_id 0 go to `on_oneway` (no reply)."""

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stream = FramedStream(reader, writer)
        permits = asyncio.Semaphore(inflight_limit)
        tasks: set[asyncio.Task] = set()

        async def run(opcode: int, request_id: int, body: bytes) -> None:
            try:
                reply_opcode, reply = await handler(opcode, body)
            except RequestError as exc:
                reply_opcode, reply = Opcode.ERROR, error_body(exc.code, exc.message, opcode)
            except Exception:
                logger.exception("internal handler failed for opcode 0x%04x", opcode)
                reply_opcode, reply = Opcode.ERROR, error_body(ErrorCode.INTERNAL, "internal error", opcode)
            finally:
                permits.release()
            if not stream.closed:
                stream.send(reply_opcode, request_id, reply)

        try:
            while True:
                await stream.wait_writable(REPLY_BACKLOG_BYTES)  # a peer not reading replies is not read
                item = await stream.read_frame()
                if item is None:
                    break
                opcode, request_id, body = item
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

    return await asyncio.start_server(on_conn, host, port)


async def keep_connected(clients: list[RpcClient], period_s: float = 0.5) -> None:
    """Background loop: reconnect every client that lost its connection (best-effort
    one-way senders such as push and projection links; failures are retried quietly)."""
    while True:
        for client in clients:
            if not client.connected:
                try:
                    await client.connect()
                except RequestError:
                    pass
        await asyncio.sleep(period_s)
