"""Mailbox -> gateway push links (docs/design.md §5.4 "best-effort PushBatch"; docs/decisions/0012,
fault 13; docs/decisions/0012-push-link-repair.md).

A push is best effort, but a dropped one must never leave an online device behind
(the client learns of new entries only from a push or its own next pull):
- every (re)connected link opens with a hello naming this node (its ShardRegistry node
  id) and the shards it serves, so the gateway's readiness waits for the push path and
  it knows which devices a lost link concerns;
- while a link is down, pushes wait in a bounded backlog (PUSH_BACKLOG_BYTES) that is
  sent right after the hello; the link is retried within RECONNECT_MAX_S;
- whatever is dropped (backlog full, a gateway too slow to read its link) sets
  `wake_all` on the next frame the gateway can take (the hello, or a wake request once
  the link drains): the gateway then wakes every online device of this node's shards
  and they pull. A new process starts with `wake_all` set: it cannot know what its
  predecessor had queued when it died. A shard taken over (`wake(shards)`) is woken the
  same way: its previous owner may have died between a finish and its push
  (docs/decisions/0040-scale-leases-and-fencing.md).
Every drop is counted by reason, every repair too. `push()` never awaits (it runs on the
shard path right after finish_dispatch).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Optional

from qim.net.oneway import DROP_PEER_SLOW, SENT, OneWayLink
from qim.net.tls import TlsContexts
from qim.proto.v1 import internal_pb2
from qim.protocol import Opcode
from qim.services.mailbox.metrics import MailboxMetrics

logger = logging.getLogger(__name__)

PUSH_BACKLOG_BYTES = 4 * 1024 * 1024  # per gateway while its link is down
PUSH_QUEUE_LIMIT = 8 * 1024 * 1024  # per gateway while the link is up but not drained
RECONNECT_MIN_S = 0.05
RECONNECT_MAX_S = 0.25  # a gateway back from a restart gets its push path (and readiness) quickly
POLL_S = 0.1  # how often a live link checks for a pending wake request


class PushLink(OneWayLink):
    """One gateway push address (qim/net/oneway.py with the hello and wake protocol).
    `push(body)` queues a serialized PushBatch; `run()` keeps the link up (cancel it to
    stop). Drop reasons counted: `backlog_full`, `gateway_slow`."""

    def __init__(self, addr: str, node_id: str, served: Callable[[], Iterable[int]], tenant: bytes,
                 backlog_bytes: int = PUSH_BACKLOG_BYTES, queue_limit: int = PUSH_QUEUE_LIMIT,
                 client: Any = None, metrics: Optional[MailboxMetrics] = None, tls: Optional[TlsContexts] = None,
                 expect_service: Optional[str] = None) -> None:
        super().__init__(addr, Opcode.PUSH_BATCH, queue_limit=queue_limit, backlog_bytes=backlog_bytes,
                         reconnect_min_s=RECONNECT_MIN_S, reconnect_max_s=RECONNECT_MAX_S, poll_s=POLL_S,
                         client=client, name="push", tls=tls, expect_service=expect_service)
        self._m = metrics if metrics is not None else MailboxMetrics()
        self._node_id = node_id
        self._served = served  # the shards this node serves now
        self._tenant = tenant
        self.wake_due = True  # a new process does not know what its predecessor lost
        self._wake: set[int] = set()  # shards to wake besides (taken over)

    def push(self, body: bytes) -> None:
        """Send now, or keep for the reconnect, or drop (counted, repaired by a wake-up)."""
        if self.send(body) == SENT:
            self._m.push_sent.inc()

    def dropped(self, reason: str) -> None:
        """Count the drop; the next frame the gateway can take asks it to wake devices."""
        self._m.push_dropped.labels(reason="gateway_slow" if reason == DROP_PEER_SLOW else reason).inc()
        self.wake_due = True
        self.poke()  # the link polls until the wake request is out

    def wake(self, shards: Iterable[int]) -> None:
        """Ask the gateway to wake the devices of `shards` (taken over by this node)."""
        self._wake.update(shards)
        self.maybe_wake()
        if self._wake:
            self.poke()

    def _control(self, hello: bool) -> bytes:
        """Hello: the served shards (woken when anything was dropped); a wake request:
        every served shard after a drop, else only those asked for by `wake`."""
        wake_all = self.wake_due or bool(self._wake)
        shards = set(self._wake)
        if hello or self.wake_due:
            shards.update(self._served())
        self._wake.clear()
        return internal_pb2.PushBatch(tenant_id=self._tenant, hello=hello, node_id=self._node_id,
                                      shards=sorted(shards), wake_all=wake_all).SerializeToString()

    def greeting(self) -> bytes:
        """The hello naming this node; it carries wake_all when anything was dropped."""
        if self.wake_due or self._wake:
            self._m.push_wakes.inc()
        hello = self._control(hello=True)
        self.wake_due = False
        return hello

    def on_connected(self) -> int:
        """Greet, then send the backlog in order (synchronously: a push() after this goes
        behind them); returns how many frames were flushed."""
        flushed = super().on_connected()
        self._m.push_flushed.inc(flushed)
        return flushed

    def idle(self) -> None:
        """On a live link: once the gateway has read what was queued, ask it to wake the
        devices whose pushes were dropped meanwhile."""
        self.maybe_wake()

    def polling(self) -> bool:
        """A wake request is pending: check every POLL_S whether the link drained."""
        return self.wake_due or bool(self._wake)

    def maybe_wake(self) -> None:
        """Send the wake request now if one is due and the link has drained to half."""
        if (self.wake_due or self._wake) and self.live and self.queued_bytes <= self._queue_limit // 2:
            self._m.push_wakes.inc()
            self.send_control(self._control(hello=False))
            self.wake_due = False
