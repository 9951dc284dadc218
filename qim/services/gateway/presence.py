"""The gateway's part of the PresenceDirectory (docs/design.md §13 "Presence";
docs/decisions/0042-scale-presence.md; record codec qim/wire/presence.py).

On every successful AUTH the connection gets a new session_epoch for its (tenant, user,
device) from the SessionEpochStore, and an entry naming this gateway (node id and
incarnation), the epoch and an expiry is published to `qim.presence`, partition = the
user's MailboxShard: the shard's MailboxNode and SessionProjection owners follow that
partition and push or send device frames only to the gateways it names. A logout
publishes a tombstone for this gateway's key; a connection replaced by a newer session
of its device publishes nothing (the newer session's entry stands). Entries of live
connections are published again every half of QIM_PRESENCE_TTL_MS (their renewal).
Publishing never blocks a login: a record the broker refuses is counted
(`qim_gateway_presence_failed_total`) and the next renewal writes it again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable, Iterable, Optional, Protocol

from qim.consts import PRESENCE_TOPIC
from qim.errors import EngineError
from qim.infra.kafka.bridge import AsyncProducer
from qim.obs.metrics import MetricSet
from qim.wire.presence import PresenceKey, encode_entry, encode_key

logger = logging.getLogger(__name__)


class PresentDevice(Protocol):
    """What an entry is made of: an authenticated device's identity, its mailbox shard
    (the topic partition) and the session_epoch of its login (decision 0042)."""

    tenant: int
    user_id: int
    device_id: int
    shard: int
    session_epoch: int


class PresencePublisher:
    """Entries of this gateway (`node_id`, `incarnation`; `since_ms` is set once it joined
    the registry). `ttl_ms`: how long an entry counts without renewal. Counts into
    `metrics` (published, failed)."""

    def __init__(self, bootstrap: str, node_id: str, incarnation: str, ttl_ms: int,
                 metrics: Optional[MetricSet] = None, producer: Optional[AsyncProducer] = None) -> None:
        self._producer = producer if producer is not None else AsyncProducer(bootstrap)
        self.node_id, self.incarnation, self.ttl_ms = node_id, incarnation, ttl_ms
        self.since_ms = 0
        m = metrics if metrics is not None else MetricSet()
        self._published = m.counter("qim_gateway_presence_published", "PresenceEntry records published", ["kind"])
        self._failed = m.counter("qim_gateway_presence_failed", "PresenceEntry records the broker refused")

    def _key(self, conn: PresentDevice) -> bytes:
        return encode_key(PresenceKey(conn.tenant, conn.user_id, conn.device_id, self.node_id))

    def _send(self, conn: PresentDevice, value: Optional[bytes], kind: str) -> None:
        try:
            fut = self._producer.produce(PRESENCE_TOPIC, value, key=self._key(conn), partition=conn.shard)
        except EngineError as exc:
            self._failed.inc()
            logger.warning("presence %s not published: %s", kind, exc)
            return
        fut.add_done_callback(self._delivered)
        self._published.labels(kind=kind).inc()

    def _delivered(self, fut: asyncio.Future) -> None:
        if fut.cancelled() or fut.exception() is not None:
            self._failed.inc()

    def online(self, conn: PresentDevice) -> None:
        """The connection authenticated (its `session_epoch` set): publish its entry."""
        expires = time.time_ns() // 1_000_000 + self.ttl_ms
        self._send(conn, encode_entry(self.incarnation, self.since_ms, conn.session_epoch, expires), "online")

    def offline(self, conn: PresentDevice) -> None:
        """The connection ended (not replaced): a tombstone for this gateway's key."""
        self._send(conn, None, "offline")

    async def renew(self, connections: Callable[[], Iterable[PresentDevice]]) -> None:
        """Every half TTL, publish the entries of `connections()` again, until cancelled."""
        while True:
            await asyncio.sleep(self.ttl_ms / 2000)
            for conn in list(connections()):
                self.online(conn)
                await asyncio.sleep(0)  # many connections: let the loop breathe

    async def close(self) -> None:
        """Flush and close the producer."""
        await self._producer.close()
