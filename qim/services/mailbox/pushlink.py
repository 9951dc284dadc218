"""Mailbox -> gateway push links (DESIGN.md §5.4 "best-effort PushBatch"; issue 10,
fault 13; docs/decisions/0012-push-link-repair.md).

A push is best effort, but a dropped one must never leave an online device behind
(the client learns of new entries only from a push or its own next pull):
- every (re)connected link opens with a hello naming this node, so the gateway's
  readiness waits for the push path and it knows which devices a lost link concerns;
- while a link is down, pushes wait in a bounded backlog (PUSH_BACKLOG_BYTES) that is
  sent right after the hello; the link is retried within RECONNECT_MAX_S;
- whatever is dropped (backlog full, a gateway too slow to read its link) sets
  `wake_all` on the next frame the gateway can take (the hello, or a wake request once
  the link drains): the gateway then wakes every online device of this node's shards
  and they pull. A new process starts with `wake_all` set: it cannot know what its
  predecessor had queued when it died.
Every drop is counted by reason, every repair too. `push()` never awaits (it runs on the
shard path right after finish_dispatch).
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Deque

from prometheus_client import Counter, Gauge

from qim.errors import RequestError
from qim.net.rpc import RpcClient
from qim.proto.v1 import internal_pb2
from qim.protocol import Opcode

logger = logging.getLogger(__name__)

PUSH_SENT = Counter("qim_mailbox_push_batches", "PushBatch frames queued to gateways")
PUSH_DROPPED = Counter("qim_mailbox_push_dropped", "PushBatch frames dropped (repaired by a wake-up)", ["reason"])
PUSH_FLUSHED = Counter("qim_mailbox_push_backlog_flushed", "PushBatch frames sent from a backlog after a reconnect")
PUSH_WAKES = Counter("qim_mailbox_push_wake_requests", "wake_all requests sent to gateways after dropped pushes")
BACKLOG = Gauge("qim_mailbox_push_backlog_bytes", "PushBatch bytes waiting for a gateway link")
LINKS_UP = Gauge("qim_mailbox_push_links_up", "Gateway push links connected and greeted")

PUSH_BACKLOG_BYTES = 4 * 1024 * 1024  # per gateway while its link is down
PUSH_QUEUE_LIMIT = 8 * 1024 * 1024  # per gateway while the link is up but not drained
RECONNECT_MIN_S = 0.05
RECONNECT_MAX_S = 0.25  # a gateway back from a restart gets its push path (and readiness) quickly
POLL_S = 0.1  # how often a live link checks for a pending wake request


class PushLink:
    """One gateway push address. `push(body)` queues a serialized PushBatch; `run()`
    keeps the link up (cancel it to stop)."""

    def __init__(self, addr: str, node_index: int, node_count: int, tenant: bytes,
                 backlog_bytes: int = PUSH_BACKLOG_BYTES, queue_limit: int = PUSH_QUEUE_LIMIT,
                 client=None) -> None:
        self.addr = addr
        self._node = (node_index, node_count)
        self._tenant = tenant
        self._client = client if client is not None else RpcClient(addr, connect_timeout=1.0)
        self._backlog: Deque[bytes] = collections.deque()
        self._backlog_size = 0
        self._backlog_limit = backlog_bytes
        self._queue_limit = queue_limit
        self.linked = False
        self.wake_due = True  # a new process does not know what its predecessor lost

    @property
    def backlog_bytes(self) -> int:
        return self._backlog_size

    def push(self, body: bytes) -> None:
        """Send now, or keep for the reconnect, or drop (counted, repaired by a wake-up)."""
        if self.linked and self._client.connected:
            if self._client.queued_bytes > self._queue_limit:
                self._drop("gateway_slow")
                return
            self._client.send_oneway(Opcode.PUSH_BATCH, body)
            PUSH_SENT.inc()
            return
        self.linked = False
        if self._backlog_size + len(body) > self._backlog_limit:
            self._drop("backlog_full")
            return
        self._backlog.append(body)
        self._backlog_size += len(body)
        BACKLOG.inc(len(body))

    def _drop(self, reason: str) -> None:
        PUSH_DROPPED.labels(reason=reason).inc()
        self.wake_due = True

    def _control(self, hello: bool) -> bytes:
        index, count = self._node
        return internal_pb2.PushBatch(tenant_id=self._tenant, hello=hello, node_index=index, node_count=count,
                                      wake_all=self.wake_due).SerializeToString()

    def on_connected(self) -> int:
        """Greet, then send the backlog in order (synchronously: a push() after this goes
        behind them); returns how many frames were flushed. The hello carries wake_all
        when anything was dropped."""
        if self.wake_due:
            PUSH_WAKES.inc()
        self._client.send_oneway(Opcode.PUSH_BATCH, self._control(hello=True))
        self.wake_due = False
        flushed = 0
        while self._backlog:
            body = self._backlog.popleft()
            self._backlog_size -= len(body)
            BACKLOG.dec(len(body))
            self._client.send_oneway(Opcode.PUSH_BATCH, body)
            flushed += 1
        PUSH_FLUSHED.inc(flushed)
        self.linked = True
        return flushed

    def maybe_wake(self) -> None:
        """On a live link: once the gateway has read what was queued, ask it to wake the
        devices whose pushes were dropped meanwhile."""
        if self.wake_due and self.linked and self._client.connected \
                and self._client.queued_bytes <= self._queue_limit // 2:
            PUSH_WAKES.inc()
            self._client.send_oneway(Opcode.PUSH_BATCH, self._control(hello=False))
            self.wake_due = False

    async def run(self) -> None:
        delay, up = RECONNECT_MIN_S, False
        try:
            while True:
                if not self._client.connected:
                    self.linked = False
                    if up:
                        up = False
                        LINKS_UP.dec()
                    try:
                        await self._client.connect()
                    except RequestError:
                        await asyncio.sleep(delay)
                        delay = min(delay * 2, RECONNECT_MAX_S)
                        continue
                    delay = RECONNECT_MIN_S
                    flushed = self.on_connected()
                    up = True
                    LINKS_UP.inc()
                    logger.info("push link to %s up (%d backlog frames sent)", self.addr, flushed)
                self.maybe_wake()
                await self._client.wait_lost(POLL_S)
        finally:
            if up:
                LINKS_UP.dec()

    async def close(self) -> None:
        await self._client.close()
