"""Best-effort one-way frames to one peer (one helper for every such path: docs/decisions/0020).

Used by the mailbox push links to gateways (with a backlog and a repair hook:
qim/services/mailbox/pushlink.py, docs/decisions/0012-push-link-repair.md), the
session node's DEVICE_FRAMES to gateways and the mailbox's PROJECTION feed to session
nodes (no backlog: a lost frame is recovered by another path).

Rules, the same for every user:
- `send(body)` never awaits and never raises: it queues the frame on a live link, keeps
  it in a bounded backlog while the link is down (`backlog_bytes`, 0 = no backlog), or
  drops it. A drop calls `dropped(reason)` once (reason DROP_BACKLOG_FULL or
  DROP_PEER_SLOW; by default the `on_drop` callback) so the owner counts it and
  arranges the repair;
- a live link whose peer has more than `queue_limit` bytes not yet taken drops (a peer
  that does not read must not grow this process's memory);
- `run()` keeps the link up: reconnects with a doubling, jittered delay capped at
  `reconnect_max_s`, whatever one attempt raised (an unexpected error is counted in
  `qim_link_failures_total{link, error}` and logged with its class: no error of one
  connection ends the link, docs/decisions/0073-links-survive-any-error.md); on every (re)connect it sends the `greeting()` frame (if any)
  and then the backlog in order, synchronously, so a `send()` after the reconnect goes
  behind them; on a live link it calls `idle()` every `poll_s` while `polling()` says
  it has something to do (a repair hook that may `send_control()`), else it sleeps until
  the connection is lost or `poke()` is called, re-checking `connected` once a second
  (IDLE_RECHECK_S) without calling `idle()` (ten wake-ups a second per link before,
  in every mailbox and session node).
A link with a protocol of its own (the push link's hello and wake requests) subclasses
and overrides `greeting()`, `idle()`, `polling()`, `dropped()` or `on_connected()`.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import random
import time
from typing import Any, Callable, Deque, Optional

from qim.errors import RequestError
from qim.faults import fault
from qim.net.framed import StreamClosed
from qim.net.rpc import RpcClient
from qim.net.tls import TlsContexts

logger = logging.getLogger(__name__)

SENT, KEPT, DROPPED = "sent", "kept", "dropped"
# Bytes a peer may leave unread on a live link before frames to it drop (the default
# of the links without a backlog: device frames, projections).
PEER_QUEUE_LIMIT = 4 * 1024 * 1024
DROP_BACKLOG_FULL = "backlog_full"  # link down and the backlog has no room (or is 0)
DROP_PEER_SLOW = "peer_slow"  # link up but the peer has not taken queue_limit bytes
# An idle link waits for its loss or a poke, and re-checks this often that its connection
# is still up (no idle() call: one timer a second per link).
IDLE_RECHECK_S = 1.0
FAILURE_LOG_EVERY_S = 10.0  # unexpected link failures: one log line per link at most this often (each is counted)


class OneWayLink:
    """One peer address, frames of one opcode with request_id 0 (no reply).

    `client` is an RpcClient-like object (tests pass a stand-in): `connected`,
    `queued_bytes`, `send_oneway(opcode, body)`, `connect()`, `wait_lost(timeout)`,
    `close()`. `name` only labels log lines ("push", "projection", ...). `tls` and
    `expect_service` go to the RpcClient (mutual TLS; qim/net/rpc.py)."""

    def __init__(self, addr: str, opcode: int, *, queue_limit: int, backlog_bytes: int = 0,
                 on_drop: Optional[Callable[[str], None]] = None,
                 reconnect_min_s: float = 0.05, reconnect_max_s: float = 0.25, poll_s: float = 0.1,
                 client=None, name: str = "one-way", tls: Optional[TlsContexts] = None,
                 expect_service: Optional[str] = None) -> None:
        self.addr = addr
        self.name = name
        self._opcode = opcode
        self._client = client if client is not None else RpcClient(addr, connect_timeout=1.0, tls=tls,
                                                                   expect_service=expect_service)
        self._queue_limit = queue_limit
        self._backlog: Deque[bytes] = collections.deque()
        self._backlog_size = 0
        self._backlog_limit = backlog_bytes
        self._on_drop = on_drop
        self._delays = (reconnect_min_s, reconnect_max_s)
        self._poll_s = poll_s
        self.linked = False  # connected and greeted: send() goes straight out
        self._poked = asyncio.Event()
        # qim_link_failures_total{link, error} of the owning node (a labelled Counter), set
        # by whoever makes the link (GatewayLinks, the projection feed); None: not counted
        self.failures: Optional[Any] = None
        self._logged_at = float("-inf")
        self._unlogged = 0

    @property
    def backlog_bytes(self) -> int:
        """Bytes kept for the next reconnect."""
        return self._backlog_size

    @property
    def queued_bytes(self) -> int:
        """Bytes queued on the live connection but not yet taken by the peer."""
        return self._client.queued_bytes

    @property
    def live(self) -> bool:
        """Linked and the connection still up."""
        return self.linked and self._client.connected

    def send(self, body: bytes) -> str:
        """Queue, keep or drop one frame; returns SENT, KEPT or DROPPED (never raises)."""
        if self.live:
            if self._client.queued_bytes > self._queue_limit:
                return self._drop(DROP_PEER_SLOW)
            try:
                self._client.send_oneway(self._opcode, body)
                return SENT
            except StreamClosed:
                pass  # lost between the check and the send: keep it like any frame of a down link
        self.linked = False
        if self._backlog_size + len(body) > self._backlog_limit:
            return self._drop(DROP_BACKLOG_FULL)
        self._backlog.append(body)
        self._backlog_size += len(body)
        return KEPT

    def send_control(self, body: bytes) -> None:
        """Send a frame of the link's own protocol (a hello, a wake request) on the
        current connection, past the queue limit. Raises StreamClosed when not connected."""
        self._client.send_oneway(self._opcode, body)

    def _drop(self, reason: str) -> str:
        self.dropped(reason)
        return DROPPED

    def dropped(self, reason: str) -> None:
        """Hook: one frame was dropped for `reason` (calls `on_drop` by default)."""
        if self._on_drop is not None:
            self._on_drop(reason)

    def greeting(self) -> Optional[bytes]:
        """Hook: the first frame of every (re)connected link, or None."""
        return None

    def idle(self) -> None:
        """Hook: called on a live link every `poll_s` while `polling()`, and after each
        `poke()` (may `send_control()`)."""

    def polling(self) -> bool:
        """Hook: whether `idle()` has work pending and must run again in `poll_s` (by
        default never: the link then waits only for its loss or a `poke()`)."""
        return False

    def poke(self) -> None:
        """Run `idle()` now and decide again whether to poll (work became pending)."""
        self._poked.set()

    def on_connected(self) -> int:
        """The connection is up: greet, then send the backlog in order; returns how many
        backlog frames went out. The link is live afterwards."""
        hello = self.greeting()
        if hello is not None:
            self._client.send_oneway(self._opcode, hello)
        flushed = 0
        while self._backlog:
            body = self._backlog.popleft()
            self._backlog_size -= len(body)
            self._client.send_oneway(self._opcode, body)
            flushed += 1
        self.linked = True
        return flushed

    async def run(self) -> None:
        """Keep the link up until cancelled (see the module doc). No exception of one
        connect attempt or of one turn on a live link ends it (docs/decisions/0073): each
        is counted (`failures`), logged with its class and message (at most once per
        FAILURE_LOG_EVERY_S per link), the connection is dropped and the link tries again
        after a jittered, doubling delay."""
        delay_min, delay_max = self._delays
        delay = delay_min
        while True:
            try:
                if not self._client.connected:
                    self.linked = False
                    fault(f"link_connect:{self.name}")  # tests only (qim/faults.py)
                    await self._client.connect()
                    delay = delay_min
                    try:
                        flushed = self.on_connected()
                    except StreamClosed:
                        continue  # lost while greeting: the backlog left is kept for the next try
                    logger.info("%s link to %s up (%d backlog frames sent)", self.name, self.addr, flushed)
                self._poked.clear()  # before idle(): a poke from here on ends the wait below
                self.idle()
                if self.polling():
                    await self._client.wait_lost(self._poll_s)
                else:
                    await self._wait_lost_or_poked()
            except Exception as exc:  # noqa: BLE001 — counted, logged, retried (docstring)
                self.linked = False
                self._failed(exc)
                if not isinstance(exc, RequestError):
                    await self._drop_connection()
                # jitter: links of many nodes to one restarted peer do not come in step
                await asyncio.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, delay_max)

    def _failed(self, exc: Exception) -> None:
        """Count one failure by error class; log the unexpected ones (a peer that is down,
        RequestError UNAVAILABLE, is the ordinary case: counted, not logged each time)."""
        error = type(exc).__name__
        if self.failures is not None:
            self.failures.labels(link=self.name, error=error).inc()
        if isinstance(exc, RequestError):
            return
        now = time.monotonic()
        self._unlogged += 1
        if now - self._logged_at >= FAILURE_LOG_EVERY_S:
            more = f" ({self._unlogged - 1} more since the last line)" if self._unlogged > 1 else ""
            logger.error("%s link to %s failed, retrying: %s: %s%s", self.name, self.addr, error, exc, more)
            self._logged_at, self._unlogged = now, 0

    async def _drop_connection(self) -> None:
        """After an unexpected error the connection may be up but not greeted: drop it, so
        the next turn connects and greets afresh (the backlog left is kept)."""
        try:
            await self._client.close()
        except Exception as exc:  # noqa: BLE001 — the next connect replaces it anyway
            logger.warning("%s link to %s: closing after a failure failed: %s: %s",
                           self.name, self.addr, type(exc).__name__, exc)

    async def _wait_lost_or_poked(self) -> None:
        # `connected` re-checked every IDLE_RECHECK_S: a connection marked closed while its
        # reader still waits (a TLS shutdown waiting for close_notify) ends no wait_lost
        lost = asyncio.ensure_future(self._client.wait_lost(None))
        poked = asyncio.ensure_future(self._poked.wait())
        try:
            while self._client.connected:
                done, _ = await asyncio.wait([lost, poked], timeout=IDLE_RECHECK_S,
                                             return_when=asyncio.FIRST_COMPLETED)
                if done:
                    return
        finally:
            for task in (lost, poked):
                task.cancel()

    async def close(self) -> None:
        """Close the connection (the owner cancels `run()` first)."""
        self.linked = False
        await self._client.close()
