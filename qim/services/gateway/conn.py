"""One client connection of the ConnectionNode (docs/design.md §4, §5.1): the frames of
one DeviceSession (device_session.py: identity, registrations, in-flight requests),
which it carries from the device and back (docs/decisions/0116 §3).

Frame faults close the connection at once (no resync). Request faults get an ERROR
frame with the request's id. Validation happens in the session before anything reaches a writer;
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
import logging
import time
from typing import Optional

from qim.errors import FrameError
from qim.net.transport import FrameTransport
from qim.protocol import Opcode
from qim.services.gateway.context import GatewayContext
from qim.services.gateway.device_session import REPLY_BACKLOG_BYTES, DeviceSession
from qim.services.gateway.pages import PageReplies

logger = logging.getLogger(__name__)

# Chunk size toward clients: a PONG waits behind at most ~one chunk in the gateway's
# socket buffers (qim/net/framed.py), 0.5 s at 30 KiB/s.
CLIENT_CHUNK_BYTES = 16 * 1024
PRE_AUTH_BUFFER_BYTES = 256 * 1024  # an AUTH frame is tiny; anonymous peers hold no more


class ClientConnection:
    """Serves one client link until it closes; `run()` returns when done. `stream` is
    any FrameTransport (qim/net/transport.py: TCP or TLS, WebSocket): the transport is a
    detail below this class, so AUTH, limits, rate buckets, back-pressure and chunking
    are the same on every one.

    `gateway` is the GatewayContext (context.py): the ConnectionNode, or a unit test's
    stand-in built from the same parts (tests/gateway/standin.py). `session`: the
    DeviceSession this connection carries (a new one when None); `ends_session`: True
    when the session ends with this connection (TCP, TLS, WebSocket), False to detach
    from it (a transport whose session outlives its connections)."""

    def __init__(self, stream: FrameTransport, gateway: GatewayContext, session: Optional[DeviceSession] = None,
                 ends_session: bool = True) -> None:
        self._stream = stream
        self._m = gateway.metrics
        self._auth_timeout_s = gateway.config.auth_timeout_s
        self._pages = PageReplies(stream, self._m)  # compressed pages, repeats behind the first copy (0087)
        if session is None:
            stream.buffer_limit = PRE_AUTH_BUFFER_BYTES  # lifted by a successful AUTH (login.py)
            session = DeviceSession(gateway)
        self.session = session
        self.ends_session = ends_session
        self.last_rx = time.monotonic()  # when a frame was read last: keepalive.py
        self._queued_seen = 0  # queued_bytes at the last silent_s(): a drop means the peer read
        session.attach(self)

    # SessionLink protocol (device_session.py)
    @property
    def stream(self) -> FrameTransport:
        """The FrameTransport this connection reads and writes."""
        return self._stream

    @property
    def pages(self) -> PageReplies:
        """Page-reply rules of this connection (pages.py)."""
        return self._pages

    def silent_s(self, now: float) -> float:
        """Seconds (time.monotonic `now`) since this connection last showed it is alive: a
        frame read, or its peer taking queued bytes since the previous call (it is not
        read while it does not read its replies). keepalive.py, decision 0077."""
        queued = self._stream.queued_bytes
        if queued < self._queued_seen:
            self.last_rx = now
        self._queued_seen = queued
        return now - self.last_rx

    async def run(self) -> None:
        """Read frames for the session until EOF, a frame fault or the AUTH timeout; then
        end the session (or detach from it: `ends_session`) and close."""
        session, stream = self.session, self._stream
        loop = asyncio.get_running_loop()
        auth_deadline = loop.time() + self._auth_timeout_s
        try:
            while True:
                # a client that does not read its replies stops being read (back-pressure)
                await stream.wait_writable(REPLY_BACKLOG_BYTES)
                if session.user_id:
                    item = await stream.read_frame()
                else:  # an unauthenticated connection has QIM_AUTH_TIMEOUT_MS to authenticate
                    # (a deadline, not wait_for: its inner task would keep a FrameError whose
                    # traceback holds that task, a cycle freed only by a full collection)
                    async with asyncio.timeout_at(auth_deadline):
                        item = await stream.read_frame()
                if item is None:
                    break
                self.last_rx = time.monotonic()
                opcode, request_id, body = item
                self._m.requests.labels(opcode=f"0x{opcode:04x}").inc()
                if not await session.receive(opcode, request_id, body):
                    break  # AUTH refused: the ERROR goes out, then the close (finally)
                if opcode == Opcode.AUTH:
                    # the device cannot speak before AUTH_OK reaches it: its silence counts
                    # from the reply, not from its AUTH (an admission wait, a slow path; 0077)
                    self.last_rx = time.monotonic()
        except FrameError as exc:
            self._m.frame_faults.labels(kind=type(exc).__name__).inc()
            logger.info("closing %s: %s", stream.peer, type(exc).__name__)
            stream.abort(f"bad frame: {type(exc).__name__}")
        except asyncio.TimeoutError:  # before OSError: TimeoutError is one (it was caught there and never counted)
            self._m.auth_timeouts.inc()
            stream.abort("no AUTH in time")
        except (ConnectionError, OSError):
            pass
        finally:
            if self.ends_session:
                session.end()
            else:
                session.detach(self)
            stream.close()
