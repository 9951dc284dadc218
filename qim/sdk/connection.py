"""One authenticated client connection: request/reply correlation over a FrameTransport
(qim/net/transport.py; the one the endpoint names: qim/sdk/transports.py).

`Connection.open(endpoint, token, tls=...)` connects with the endpoint's transport
(host:port: TCP, then TLS 1.3 with ALPN qim/1; wss:// or ws://: WebSocket; the server
certificate verified: `client_tls()`), sends AUTH and waits for AUTH_OK (docs/design.md §4,
docs/protocol.md). A certificate the client does not trust, a server that refuses TLS
1.3 or the ALPN, or a WebSocket upgrade refused with a 4xx raises TlsError: trying again
cannot help, so the runtime does not retry it (no reconnect storm against a
misconfigured endpoint). Afterwards `request(opcode, body)` sends one frame
with a fresh request_id (u32, never 0) and returns the reply (opcode, body); an ERROR
reply raises ServerError, a dropped connection ConnectionLost. Server-initiated
frames (request_id 0) go to `on_push` (PUSH_EVENTS), `on_kicked` (KICKED),
`on_session_delta` (SESSION_DELTA), `on_read_sync` (READ_SYNC) and `on_room_events`
(ROOM_EVENTS). Every
ERROR(RATE_LIMITED) to a request the send-rate buckets charge goes to
`on_rate_limited(retry_after_ms)` before its waiter hears of it, also when nobody waits
any more (a repeat's answer): the runtime's RateGate must know every refusal.

The ACK deadline probe (`request_probed`), the keepalive PINGs (`heartbeat`) and `ping`
are the Liveness half (qim/sdk/liveness.py); `last_rx` is the monotonic time of the last
byte received, `bytes_rx` how many arrived.
"""
from __future__ import annotations

import asyncio
import logging
import ssl
import time
from typing import Callable, Optional

from qim.errors import ErrorCode, FrameError
from qim.net.transport import FrameTransport, StreamClosed
from qim.proto.v1 import common_pb2, connection_pb2, mailbox_pb2, room_pb2, session_pb2
from qim.protocol import RATE_LIMITED_OPCODES, Opcode
from qim.sdk.events import Banned, ConnectionLost, PolicyRefused, ServerError
from qim.sdk.liveness import Liveness
from qim.sdk.transports import ProgressReader, endpoint_tls, open_transport
from qim.wire.errors import decode_error

logger = logging.getLogger(__name__)
CLIENT_VERSION = "qim-sdk-py/0.1"


def client_tls(endpoint: str, ca_file: Optional[str] = None, ssl_context: Optional[ssl.SSLContext] = None,
               plaintext: bool = False) -> Optional[ssl.SSLContext]:
    """The TLS context a client of `endpoint` connects with: `ssl_context` as given, else
    TLS 1.3 verifying the server against `ca_file`, else $QIM_CA_FILE, else the system's
    trust store (qim/net/tls.py client_port_context), offering ALPN qim/1 (host:port) or
    http/1.1 (wss://; qim/sdk/transports.py). `plaintext=True` (None: no TLS) only toward
    a development gateway on loopback (QIM_GATEWAY_PLAINTEXT_DEV=1), as is a ws://
    endpoint: ValueError for another address (a token must never cross a network in the
    clear), with a CA, or for a malformed endpoint. TlsError when the CA file cannot be read."""
    return endpoint_tls(endpoint, ca_file, ssl_context, plaintext)


# TCP + TLS handshake + AUTH answer. A refused port fails at once whatever this is; the
# bound is for a gateway that answers slowly, and a busy 2-core host (CI, a laptop on
# battery) took more than 5 s for a TLS handshake under load, which failed connect().
CONNECT_TIMEOUT_S = 15.0


def _server_error(body: bytes) -> ServerError:
    """The ServerError of an ERROR body (qim/wire/errors.py decode_error: an unreadable
    body is INTERNAL, never a silent success); PolicyRefused for a send policy's refusal."""
    err = decode_error(body)
    if err.code == ErrorCode.BANNED:  # a refused login of a banned user (docs/decisions/0123, Amendment 2)
        reason = err.message.partition(": ")[2] or err.message
        return Banned(reason, common_pb2.Error.FromString(body).until_ms, err.message)
    return (PolicyRefused if err.code == ErrorCode.POLICY_REFUSED else ServerError)(*err)


class Connection(Liveness):
    """An authenticated stream. Create with `await Connection.open(...)`."""

    def __init__(self, stream: FrameTransport, progress: Optional[ProgressReader] = None) -> None:
        self._stream = stream
        self._progress = progress
        self._waiters: dict[int, asyncio.Future] = {}
        self._next_id = 0
        self.auth = connection_pb2.AuthOk()  # filled by open(), which returns only after AUTH_OK
        self.on_push: Callable[[mailbox_pb2.PushEvents], None] = lambda push: None
        self.on_kicked: Callable[[int], None] = lambda reason: None
        self.kicked: Optional[connection_pb2.Kicked] = None  # the last KICKED frame
        self.on_session_delta: Callable[[session_pb2.SessionDelta], None] = lambda delta: None
        self.on_read_sync: Callable[[session_pb2.ReadSync], None] = lambda sync: None
        self.frame_handlers: dict[int, Callable[[bytes], None]] = {}  # further server frames: opcode -> handler(body)
        self.on_room_events: Callable[[room_pb2.RoomEvents], None] = lambda frame: None
        self.on_ephemeral: Callable[[int, bytes], None] = lambda opcode, body: None  # reactions, typing
        self.on_rate_limited: Callable[[int], None] = lambda retry_after_ms: None
        self.closed = asyncio.get_running_loop().create_future()  # result: reason str
        self._reader: Optional[asyncio.Task] = None
        self._deaf = False
        self.last_tx = time.monotonic()  # of the last frame sent: the heartbeat's clock

    @classmethod
    async def open(cls, endpoint: str, token: str, timeout: float = CONNECT_TIMEOUT_S,
                   tls: Optional[ssl.SSLContext] = None) -> "Connection":
        """Connect and authenticate; `tls`: the context of `client_tls()` (None:
        plaintext, development only). ServerError(UNAUTHENTICATED) on a refused token,
        ConnectionLost when the endpoint cannot be reached or drops during AUTH, TlsError
        when TLS fails for good (module doc)."""
        stream, progress = await open_transport(endpoint, tls, timeout)  # the endpoint's transport
        conn = cls(stream, progress)
        conn._reader = asyncio.get_running_loop().create_task(conn._read_loop())
        try:
            op, body = await conn.request(Opcode.AUTH, connection_pb2.Auth(
                token=token, client_version=CLIENT_VERSION).SerializeToString(), timeout=timeout)
            if op != Opcode.AUTH_OK:
                raise ConnectionLost(f"unexpected reply 0x{op:04x} to AUTH")
            conn.auth = connection_pb2.AuthOk.FromString(body)
        except ConnectionLost as exc:
            conn.abort("auth failed")
            if tls is None and conn.bytes_received == 0:  # a TLS port reads a plaintext AUTH as a bad ClientHello
                raise ConnectionLost(f"{endpoint} closed the connection before answering AUTH in plaintext") from exc
            raise
        except BaseException:
            conn.abort("auth failed")
            raise
        return conn

    @property
    def bytes_received(self) -> int:
        """Bytes read from the gateway so far."""
        return self._progress.bytes_rx if self._progress is not None else 0

    @property
    def is_open(self) -> bool:
        """True until the connection closed (locally or by the peer)."""
        return not self.closed.done()

    @property
    def last_rx(self) -> float:
        """Monotonic time of the last byte received (the connection's start before any)."""
        return self._progress.last_rx if self._progress is not None else 0.0

    @property
    def bytes_rx(self) -> int:
        """Bytes received so far (0 when not counted)."""
        return self._progress.bytes_rx if self._progress is not None else 0

    def _rid(self) -> int:
        self._next_id = self._next_id % 0xFFFFFFFF + 1  # u32, never 0 (0 = server-initiated)
        return self._next_id

    def send_request(self, opcode: int, body: bytes) -> asyncio.Future:
        """Queue one request frame; the future gets (opcode, body) or an exception."""
        if not self.is_open:
            raise ConnectionLost("connection is closed")
        rid = self._rid()
        fut = asyncio.get_running_loop().create_future()
        self._waiters[rid] = fut
        fut.add_done_callback(lambda _f: self._waiters.pop(rid, None))
        try:
            self._stream.send(opcode, rid, body)
            self.last_tx = time.monotonic()
        except StreamClosed as exc:
            self._waiters.pop(rid, None)
            raise ConnectionLost("connection is closed") from exc
        return fut

    async def request(self, opcode: int, body: bytes, timeout: Optional[float] = None) -> tuple[int, bytes]:
        """Send and await the reply; asyncio.TimeoutError after `timeout` seconds."""
        fut = self.send_request(opcode, body)
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            fut.cancel()

    def go_deaf(self) -> None:
        """Drop every inbound frame from now on: only qim/sdk/faults.py's test cut calls it."""
        self._deaf = True

    async def flush(self) -> None:
        """Wait until queued frames were handed to the socket."""
        try:
            await self._stream.flush()
        except StreamClosed as exc:
            raise ConnectionLost("connection is closed") from exc

    async def _read_loop(self) -> None:
        reason = "closed by server"
        try:
            while True:
                frame = await self._stream.read_frame()
                if frame is None:
                    break
                opcode, rid, body = frame
                if self._deaf:
                    continue  # test hook: the network is already cut for inbound frames
                if rid == 0:
                    self._server_frame(opcode, body)
                    continue
                fut = self._waiters.get(rid)
                if opcode == Opcode.ERROR:
                    exc = _server_error(body)
                    if exc.code == ErrorCode.RATE_LIMITED and exc.request_opcode in RATE_LIMITED_OPCODES:
                        self.on_rate_limited(exc.retry_after_ms)  # first: the gate closes before anyone retries
                    if fut is not None and not fut.done():
                        fut.set_exception(exc)
                elif fut is not None and not fut.done():  # else a reply after its waiter gave up
                    fut.set_result((opcode, body))
        except FrameError as exc:
            reason = f"frame error {exc.__class__.__name__}"
        except (ConnectionError, OSError) as exc:
            reason = f"socket error {(exc.__cause__ or exc).__class__.__name__}"  # StreamClosed names its cause
        finally:
            self._finish(reason)

    def _server_frame(self, opcode: int, body: bytes) -> None:
        try:
            if opcode == Opcode.PUSH_EVENTS:
                self.on_push(mailbox_pb2.PushEvents.FromString(body))
            elif opcode == Opcode.KICKED:
                self.kicked = connection_pb2.Kicked.FromString(body)  # BANNED's reason and end: the runtime reads them
                self.on_kicked(self.kicked.reason)
            elif opcode == Opcode.SESSION_DELTA:
                self.on_session_delta(session_pb2.SessionDelta.FromString(body))
            elif opcode == Opcode.READ_SYNC:
                self.on_read_sync(session_pb2.ReadSync.FromString(body))
            elif opcode == Opcode.ROOM_EVENTS:
                self.on_room_events(room_pb2.RoomEvents.FromString(body))
            elif opcode in (Opcode.REACTION_EVENTS, Opcode.TYPING_EVENTS):  # qim/sdk/reactions.py
                self.on_ephemeral(opcode, body)
            elif opcode in self.frame_handlers:  # CONVERSATION_STATE_SYNC, READ_RECEIPT (convstate.py)
                self.frame_handlers[opcode](body)
            else:
                logger.debug("ignoring server frame 0x%04x", opcode)
        except Exception:  # a bad push must not kill the reader
            logger.exception("server frame 0x%04x could not be handled", opcode)

    def _finish(self, reason: str) -> None:
        if not self.closed.done():
            self.closed.set_result(reason)
        for fut in list(self._waiters.values()):
            if not fut.done():
                fut.set_exception(ConnectionLost(reason))
                fut.exception()  # mark retrieved: nobody may be waiting any more
        self._waiters.clear()

    def abort(self, reason: str = "aborted") -> None:
        """Drop the connection at once (queued frames are lost)."""
        self._stream.abort()
        self._finish(reason)

    async def close(self) -> None:
        """Close after queued frames are written; waits for the reader to stop."""
        self._stream.close()
        self._finish("closed by client")
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except BaseException:  # noqa: BLE001 — reader cancelled or already failed
                pass
        try:
            await asyncio.wait_for(self._stream.wait_closed(), 2.0)
        except (asyncio.TimeoutError, ConnectionError, OSError):
            pass
