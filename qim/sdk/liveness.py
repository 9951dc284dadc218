"""The liveness half of a client Connection (qim/sdk/connection.py): the ACK deadline
probe of a request, the keepalive PINGs and the PING probe itself.

`request_probed` implements the ACK deadline (docs/design.md §9, §11): after 3 s without a
reply it sends PING; no PONG within `probe_s` (4 s) aborts the connection, so an
unavailable server is detected within 7 s. Liveness is progress (decision 0011): a
PONG may queue behind the bytes of a large page on a slow link, so the probe only fails
when NO byte arrived during a whole `probe_s` window. The heartbeat PINGs on a fixed
schedule from the last frame sent (decisions 0077, 0095).
"""
from __future__ import annotations

import asyncio
import functools
import time
from typing import Awaitable, Callable, Optional

from qim.consts import SEND_ACK_PROBE_S
from qim.proto.v1 import connection_pb2
from qim.protocol import Opcode
from qim.sdk.events import ConnectionLost

PROBE_S = 4.0


class Liveness:
    """Probes and keepalive of a Connection, which provides send_request, abort,
    is_open, closed, last_tx, last_rx and bytes_rx (qim/sdk/connection.py)."""

    closed: asyncio.Future
    last_tx: float

    def send_request(self, opcode: int, body: bytes) -> asyncio.Future:
        """Queue one request frame (Connection.send_request)."""
        raise NotImplementedError

    def abort(self, reason: str = "aborted") -> None:
        """Drop the connection at once (Connection.abort)."""
        raise NotImplementedError

    @property
    def is_open(self) -> bool:
        """True until the connection closed (Connection.is_open)."""
        raise NotImplementedError

    @property
    def last_rx(self) -> float:
        """Monotonic time of the last byte received (Connection.last_rx)."""
        raise NotImplementedError

    @property
    def bytes_rx(self) -> int:
        """Bytes received so far (Connection.bytes_rx)."""
        raise NotImplementedError

    async def request_probed(self, opcode: int, body: bytes | Callable[[], bytes],
                             deadline_s: float = SEND_ACK_PROBE_S, probe_s: float = PROBE_S,
                             repeat: bool = False, first: Optional[asyncio.Future] = None,
                             pace: Optional[Callable[[], Awaitable[None]]] = None,
                             repeat_every: int = 1, quiet_bytes: int = 0) -> tuple[int, bytes]:
        """Send and await the reply. Each `deadline_s` without one sends PING (see ping:
        no byte and no PONG within `probe_s` aborts, ConnectionLost); with a PONG the wait
        goes on, and with `repeat` (idempotent requests only: a SEND_MESSAGE keeps its
        client_message_id, a PULL_MAILBOX its cursor) the request is sent again under a
        new request_id after every `repeat_every`-th answered probe, after `await pace()`
        (the RateGate's Permit.again: a repeat costs a token too). The first reply of any
        transmission wins; the others are dropped. `body` may be a callable giving the
        bytes of each transmission (fields recomputed per transmission); `first` is a
        transmission already queued by send_request. `quiet_bytes` > 0: only a probe
        window in which fewer bytes than that arrived counts toward a repeat; one that
        received more starts the count again, because the reply may be what is arriving
        (a large page on a slow link: asking again would send it twice; decision 0087)."""
        make = body if callable(body) else (lambda: body)
        futs = [first if first is not None else self.send_request(opcode, make())]
        probes = 0
        rx = self.bytes_rx
        try:
            while True:
                done, _ = await asyncio.wait(futs, timeout=deadline_s, return_when=asyncio.FIRST_COMPLETED)
                if done:
                    return done.pop().result()
                await self.ping(probe_s)
                probes += 1
                if quiet_bytes and self.bytes_rx - rx >= quiet_bytes:
                    probes = 0  # bytes flowed: the reply may be in flight, never ask again now
                rx = self.bytes_rx
                if repeat and probes and probes % max(1, repeat_every) == 0:
                    await (pace() if pace is not None else asyncio.sleep(0))
                    futs.append(self.send_request(opcode, make()))
        finally:
            for fut in futs:
                fut.cancel()


    async def heartbeat(self, interval: float, probe_s: float = PROBE_S) -> None:
        """A PING whenever `interval` s (half the heartbeat) passed since the last frame
        SENT, whether or not the previous PONG is back: the gateway evicts/reaps a client
        it hears nothing from (decision 0077), and a slow path's round trip must not
        stretch the gap (decision 0095). Each PING is a probe (see ping: no PONG and no
        byte within `probe_s` aborts). Returns when closed; ConnectionLost from a send."""
        probes: set[asyncio.Task] = set()
        try:
            while self.is_open:
                if (wait := self.last_tx + interval - time.monotonic()) > 0:
                    await asyncio.wait([self.closed], timeout=wait)
                    continue
                probe = asyncio.get_running_loop().create_task(self._probe(self._send_ping(), probe_s))
                probes.add(probe)
                # ConnectionLost of a failed probe: it aborted the connection, which ends this loop
                probe.add_done_callback(functools.partial(_probe_done, probes))
        finally:
            for probe in list(probes):
                probe.cancel()

    def _send_ping(self) -> asyncio.Future:
        body = connection_pb2.Ping(client_time_ms=int(time.time() * 1000)).SerializeToString()
        return self.send_request(Opcode.PING, body)

    async def ping(self, timeout: float = PROBE_S) -> int:
        """PING → PONG; returns the server time (ms). The probe fails only when a whole
        `timeout` window passes with neither the PONG nor any other byte received (a
        PONG may wait behind page bytes on a slow link): then abort, ConnectionLost."""
        return await self._probe(self._send_ping(), timeout)

    async def _probe(self, fut: asyncio.Future, timeout: float) -> int:
        try:
            while True:
                window = time.monotonic()
                try:
                    op, reply = await asyncio.wait_for(asyncio.shield(fut), timeout)
                    break
                except asyncio.TimeoutError:
                    if self.is_open and self.last_rx >= window:
                        continue  # bytes arrived during the window: alive, still receiving
                    self.abort("ping timeout")
                    raise ConnectionLost("no PONG and no byte within the probe deadline") from None
        finally:
            fut.cancel()
        if op != Opcode.PONG:
            raise ConnectionLost(f"unexpected reply 0x{op:04x} to PING")
        return connection_pb2.Pong.FromString(reply).server_time_ms



def _probe_done(probes: set, task: asyncio.Task) -> None:
    """Forget a finished keepalive probe and retrieve its outcome (a ConnectionLost of a
    failed probe aborted the connection already; retrieving it keeps asyncio quiet)."""
    probes.discard(task)
    if not task.cancelled():
        task.exception()
