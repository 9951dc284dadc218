"""The gateway's half of REACT and TYPING: the ephemeral delivery kinds
(docs/decisions/0121-reactions-and-typing-are-ephemeral.md; docs/protocol.md "Reactions
and typing"). The writer row's LocalBackend (qim/topology.py; qim/services/gateway/routes.py).

- Every other writer request passes through unchanged.
- TYPING is rate-limited per device and conversation here: at most one every
  TYPING_MIN_INTERVAL_MS (a "stopped" always passes); a faster one is answered
  TYPING_OK `delivered: false` with the wait, without reaching the writer.
- The writer answers REACT and TYPING with an EphemeralDone: the client's reply, the
  event and the conversation's members. The event goes, unchanged and best effort, to
  every online device of those members held by this gateway (but the acting device) and
  in ONE EphemeralFrames per other live gateway of the ShardRegistry (its push
  listener), which does the same for the devices it holds (`deliver`). No mailbox entry,
  no Outbox record, no backlog: a device that was away reads the reaction summaries with
  history; a lost typing indication expires by itself. A device whose outbound queue
  holds more than EPHEMERAL_QUEUE_BYTES misses the event (counted).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable, Iterable

from qim.cluster.links import GatewayLinks
from qim.cluster.owners import OwnerTable
from qim.net.oneway import DROPPED, KEPT, PEER_QUEUE_LIMIT, SENT, OneWayLink
from qim.net.transport import StreamClosed
from qim.obs.metrics import MetricSet
from qim.proto.v1 import reaction_pb2
from qim.protocol import Opcode
from qim.topology import GATEWAY
from qim.wire.reaction import TYPING_MIN_INTERVAL_MS

logger = logging.getLogger(__name__)

EPHEMERAL_QUEUE_BYTES = 1024 * 1024  # a device with more unsent than this misses ephemeral events
PEER_BACKLOG_BYTES = 256 * 1024  # frames kept while a link to another gateway (re)connects
EVENT_OPCODES = frozenset({Opcode.REACTION_EVENTS, Opcode.TYPING_EVENTS})


class EphemeralFanout:
    """LocalBackend of the writer row (module doc). `gateway`: the ConnectionNode (or a
    stand-in): `online` (OnlineRegistry: `connections(tenant, user)`), `metrics`, and,
    on a node in a cluster, `cluster.shard_registry`, `config.registry.node_id`,
    `internal_tls` and `spawn()`; the node awaits `close()` when it stops."""

    def __init__(self, gateway: Any) -> None:
        self.gw = gateway
        m = getattr(gateway, "metrics", None)
        m = m if isinstance(m, MetricSet) else MetricSet()
        self._frames = m.counter("qim_gateway_ephemeral_frames", "REACTION_EVENTS / TYPING_EVENTS sent to devices",
                                 ["opcode"])
        self._dropped = m.counter("qim_gateway_ephemeral_dropped", "ephemeral events a slow device missed")
        self._relayed = m.counter("qim_gateway_ephemeral_relayed", "EphemeralFrames sent to other gateways")
        self._relay_dropped = m.counter("qim_gateway_ephemeral_relay_dropped",
                                        "EphemeralFrames another gateway's link could not take")
        self._typing_held = m.counter("qim_gateway_typing_throttled", "TYPING answered not delivered (too soon)")
        self._last_typing: dict[tuple[int, bytes], float] = {}  # (conn_id, conversation) -> monotonic s
        self._links: GatewayLinks | None = None
        self._started = False

    # --- client requests ------------------------------------------------------------
    async def request(self, conn: Any, opcode: int, key: Any, body: bytes,
                      call: Callable[[], Awaitable[tuple[int, bytes]]]) -> tuple[int, bytes]:
        """Any writer request of `conn`; REACT and TYPING get their event fanned out."""
        if opcode not in (Opcode.REACT, Opcode.TYPING):
            return await call()
        if opcode == Opcode.TYPING:
            wait_ms = self._typing_wait(conn, key, body)
            if wait_ms:
                self._typing_held.inc()
                return Opcode.TYPING_OK, reaction_pb2.TypingOk(delivered=False,
                                                               retry_after_ms=wait_ms).SerializeToString()
        reply_opcode, reply = await call()
        if reply_opcode == Opcode.ERROR:
            return reply_opcode, reply
        done = reaction_pb2.EphemeralDone.FromString(reply)
        if done.event_opcode in EVENT_OPCODES:
            await self._start_links()
            frames = reaction_pb2.EphemeralFrames(
                tenant_id=conn.tenant.to_bytes(16, "big"), user_ids=done.user_ids, opcode=done.event_opcode,
                body=done.event, exclude_user_id=conn.user_id, exclude_device_id=conn.device_id)
            self.deliver(frames)
            self._relay(frames.SerializeToString())
        return reply_opcode, done.reply

    def _typing_wait(self, conn: Any, conversation_id: bytes, body: bytes) -> int:
        """0 when this TYPING may go now (and it is recorded), else the ms to wait."""
        if reaction_pb2.Typing.FromString(body).stopped:
            return 0
        now = time.monotonic()
        key = (conn.conn_id, conversation_id)
        last = self._last_typing.get(key)
        if last is not None and (now - last) * 1000 < TYPING_MIN_INTERVAL_MS:
            return max(1, int(TYPING_MIN_INTERVAL_MS - (now - last) * 1000))
        self._last_typing[key] = now
        return 0

    def closed(self, conn: Any) -> None:
        """`conn` ended: forget its typing times."""
        for key in [k for k in self._last_typing if k[0] == conn.conn_id]:
            del self._last_typing[key]

    def on_push(self, addr: str, body: bytes) -> None:
        """Writers push nothing on the gateway's connections."""

    def on_lost(self, addr: str) -> None:
        """Nothing is kept per writer connection."""

    # --- delivery ---------------------------------------------------------------------
    def deliver(self, frames: reaction_pb2.EphemeralFrames) -> int:
        """The event to every device held here of `frames.user_ids` but the excluded one;
        returns how many got it. Also what the push listener calls for another gateway's
        EphemeralFrames (qim/services/gateway/pushlink.py)."""
        if frames.opcode not in EVENT_OPCODES:
            self._dropped.inc()
            return 0
        tenant = int.from_bytes(frames.tenant_id, "big")
        label = f"0x{frames.opcode:04x}"
        sent = 0
        for user in frames.user_ids:
            for device in self._devices(tenant, user):
                if user == frames.exclude_user_id and device.device_id == frames.exclude_device_id:
                    continue
                if device.queued_bytes > EPHEMERAL_QUEUE_BYTES:
                    self._dropped.inc()
                    continue
                try:
                    device.send(frames.opcode, 0, frames.body)
                    sent += 1
                except (StreamClosed, ConnectionError):
                    self._dropped.inc()
        if sent:
            self._frames.labels(opcode=label).inc(sent)
        return sent

    def _devices(self, tenant: int, user: int) -> Iterable[Any]:
        return self.gw.online.connections(tenant, user)

    def _relay(self, body: bytes) -> None:
        if self._links is None:
            return
        for link in self._links:
            outcome = link.send(body)
            if outcome in (SENT, KEPT):
                self._relayed.inc()
            elif outcome == DROPPED:
                self._relay_dropped.inc()

    async def _start_links(self) -> None:
        """The links to the other gateways, made at the first event (a gateway whose
        devices never react needs none: it only receives, on its push listener)."""
        if self._started:
            return
        self._started = True
        cluster = getattr(self.gw, "cluster", None)
        if cluster is None:
            return  # a gateway without a registry (unit tests): this gateway's devices only
        me = self.gw.config.registry.node_id
        owners = OwnerTable(cluster.shard_registry, {}, (GATEWAY,))
        tls = getattr(self.gw, "internal_tls", None)
        self._links = GatewayLinks(owners, lambda node, addr: _PeerLink(
            node == me, addr, Opcode.EPHEMERAL_FRAMES, queue_limit=PEER_QUEUE_LIMIT, backlog_bytes=PEER_BACKLOG_BYTES,
            name="ephemeral", tls=tls, expect_service=GATEWAY))
        await owners.refresh(force=True)
        self._links.sync()
        self.gw.spawn(self._links.run(), "ephemeral links")

    async def close(self) -> None:
        """Close the links to other gateways (the node stops)."""
        links, self._links = self._links, None
        if links is not None:
            await links.close()


class _PeerLink(OneWayLink):
    """A OneWayLink to another gateway; the one naming this gateway itself sends nothing
    (its devices were served in place) and never connects."""

    def __init__(self, itself: bool, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.itself = itself

    def send(self, body: bytes) -> str:
        """OneWayLink.send, but nothing for this gateway itself (`"itself"`)."""
        return "itself" if self.itself else super().send(body)

    async def run(self) -> None:
        """OneWayLink.run, but this gateway's own entry only waits (never dials itself)."""
        if not self.itself:
            await super().run()
            return
        await asyncio.Event().wait()
