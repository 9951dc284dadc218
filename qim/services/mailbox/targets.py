"""Where a MailboxNode's pushes go (docs/design.md §13 "Presence"; docs/decisions/0042-scale-presence.md).

One push link per live gateway of the ShardRegistry (qim/cluster/links.py). The node
follows the presence partitions of the shards it owns (qim/cluster/presence.py) and
sends a materialized record's position (PushBatch position: mailbox_seq, message id and
the recipients a gateway holds; docs/decisions/0033-path-push-positions-not-payloads.md;
the entries only of a small direct record, with each user's previous position:
docs/decisions/0156-inline-pushes.md) only to the gateways holding one
of its recipients' devices, one frame per holding gateway: no synchronous remote call
on the push path (`qim_mailbox_push_gateways` counts the gateways each record went to). While a
shard's presence is still being read (just taken over), its pushes go to every gateway.
A device seen logging in is woken at once (a message materialized between its login
pull and its entry reaching this node would otherwise wait for its next pull); a device
whose newer session logged in on another gateway has its older session kicked there,
exactly that session, once. A gateway listed again after its lease lapsed (its process
and connections lived on) has the devices of this node's shards woken: their pushes were
withheld meanwhile (qim/cluster/links.py; decision 0153).
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

from qim.cluster.links import GatewayLinks
from qim.cluster.owners import OwnerTable
from qim.cluster.presence import PresenceFollower
from qim.net.tls import TlsContexts
from qim.obs import otel
from qim.proto.v1 import internal_pb2
from qim.services.mailbox.inline import Inline
from qim.services.mailbox.metrics import MailboxMetrics
from qim.services.mailbox.pushlink import PushLink
from qim.topology import GATEWAY
from qim.wire.presence import PresenceKey

# recipients per PushBatch frame: at most ~10 bytes each, ~160 KiB (the frame limit is 4 MiB)
PUSH_USERS_PER_FRAME = 16_384


class PushTargets:
    """Push links and presence of one node (`node_id`, serving `served()` shards)."""

    def __init__(self, bootstrap: str, node_id: str, served, peers: OwnerTable, tenant: bytes,
                 metrics: MailboxMetrics, tls: TlsContexts | None, link_failures: Any = None) -> None:
        self._m = metrics
        self._tenant = tenant
        self.gateways = GatewayLinks(peers, lambda gw, addr: PushLink(addr, node_id, served, tenant, metrics=metrics,
                                                                       tls=tls, expect_service=GATEWAY),
                                     failures=link_failures, on_back=lambda link: link.wake(served()))
        self.presence = PresenceFollower(bootstrap, "qim-mailbox-presence", self.gateways.live,
                                         on_online=self._online, on_replaced=self._replaced,
                                         on_bad=metrics.presence_bad.inc)
        metrics.watch_push_links(self.gateways)

    async def add_shard(self, shard: int) -> None:
        """Follow the shard's presence and wake its devices on every gateway (its previous
        owner may have died between a finish and its push)."""
        await self.presence.add_shard(shard)
        for link in self.gateways:
            link.wake([shard])

    async def remove_shard(self, shard: int) -> None:
        """Stop following the shard's presence."""
        await self.presence.remove_shard(shard)

    def push(self, shard: int, tenant: int, seq: int, users: Sequence[int], message_id: bytes,
             trace_id: bytes = b"", inline: Optional[Inline] = None) -> None:
        """The position of one record of `shard` (its mailbox_seq and message; `trace_id`:
        the message's, for the gateway's log lines) to each gateway holding a recipient's
        device, with the recipients it holds (every gateway, every recipient, while the
        shard's presence is being read) and the inline part of those it holds (`inline`:
        user -> (prev_mailbox_seq, entries), decisions/0156). Never awaits."""
        by_gateway: dict[str, list[int]] = {}
        for user in users:
            gateways = self.presence.gateways_of(shard, tenant, user)
            if gateways is None:
                by_gateway = {gw: list(users) for gw in self.gateways.links}
                break
            for gw in gateways:
                by_gateway.setdefault(gw, []).append(user)
        sent = 0
        for gw, held in by_gateway.items():
            link = self.gateways.links.get(gw)
            if link is None:
                continue  # a gateway the registry did not list yet: its devices pull on the hello's wake
            for body in push_bodies(tenant, seq, message_id, held, trace_id, inline):
                link.push(body)
            sent += 1
            if inline:
                self._m.inline_pushes.inc(sum(1 for user in held if user in inline))
        self._m.push_gateways.observe(sent)

    def _online(self, key: PresenceKey) -> None:
        link = self.gateways.links.get(key.gateway)
        if link is not None:  # a position without a mailbox_seq is a wake-up: the device pulls
            link.push(push_bodies(key.tenant, 0, b"", [key.user])[0])

    def _replaced(self, key: PresenceKey, session_epoch: int) -> None:
        link = self.gateways.links.get(key.gateway)
        if link is None:
            return
        self._m.kicks_requested.inc()
        link.push(internal_pb2.PushBatch(tenant_id=key.tenant.to_bytes(16, "big"), kicks=[
            internal_pb2.PushBatch.Kick(user_id=key.user, device_id=key.device,
                                        session_epoch=session_epoch)]).SerializeToString())

    def links(self) -> Iterable[Any]:
        """The current push links."""
        return list(self.gateways)

    async def close(self) -> None:
        """Close the links and the presence consumer."""
        await self.gateways.close()
        await self.presence.close()


def push_bodies(tenant: int, seq: int, message_id: bytes, users: Sequence[int], trace_id: bytes = b"",
                inline: Optional[Inline] = None) -> list[bytes]:
    """Serialized PushBatch frames of one record's position: mailbox_seq `seq` (0: a
    wake-up), the record's `message_id` (16 bytes; the load generator's first sighting)
    and the recipients `users` a gateway holds, at most PUSH_USERS_PER_FRAME per frame.
    No entry and no body, but for the users of `inline` (user -> (prev_mailbox_seq, the
    serialized entries at `seq`): a small direct record, at most INLINE_MAX_USERS of
    INLINE_MAX_BYTES each; decisions/0156); the others' devices pull (their cursor may
    already be there). `trace_id`: the message's, for the gateway's log lines."""
    tenant_id = tenant.to_bytes(16, "big")
    bodies = []
    for i in range(0, len(users), PUSH_USERS_PER_FRAME):
        batch = internal_pb2.PushBatch(tenant_id=tenant_id)
        part = users[i:i + PUSH_USERS_PER_FRAME]
        pos = batch.positions.add(mailbox_seq=seq, message_id=message_id, user_ids=part, trace_id=trace_id,
                                  span_id=otel.pushed_span_id(trace_id))  # b"": untraced (0140)
        if inline:
            for user in part:
                whole = inline.get(user)
                if whole is not None:
                    pos.inline.add(user_id=user, prev_mailbox_seq=whole[0], entries=whole[1])
        bodies.append(batch.SerializeToString())
    return bodies
