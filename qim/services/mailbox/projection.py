"""Mailbox side of the low-latency Projection path, mailbox -> session (docs/design.md §5.4
last step, §6; seed 004 §5 "Projection → session（try_send，满则丢）").

After a dispatch record is final, one PROJECTION frame (opcode 0x7F07, one-way) to the
session node that owns the record's session shard (every recipient of a dispatch record
is in its target shard; the same shard number names the session shard: docs/design.md §13),
looked up in the ShardRegistry's cached OwnerTable, over a qim/net/oneway.py link per
session node address (made on first use, no backlog). The owner registers the sender of
a direct message too, whatever its shard, exactly as its durable consumer does. Never
awaited on the shard path; a session shard without a live owner, or a session node that
is down or has more than PEER_QUEUE_LIMIT bytes unread, loses the frame (counted in
`qim_mailbox_projection_dropped_total`). Dropping is safe: the session owner's durable
dispatch consumer registers the same messages with the same script. Each message names
where its record was read (shard and mailbox_seq), so the durable consumer skips the
records this path registered instead of writing them again (docs/decisions/0167). The
session side is qim/services/session/feed.py (ProjectionIntake).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Optional, Sequence

from qim._core.types import MailboxEvent
from qim.cluster.owners import OwnerTable
from qim.net.oneway import PEER_QUEUE_LIMIT, SENT, OneWayLink
from qim.net.tls import TlsContexts
from qim.proto.v1 import projection_pb2
from qim.protocol import Opcode
from qim.services.mailbox.metrics import MailboxMetrics
from qim.topology import SESSION

logger = logging.getLogger(__name__)

RECONNECT_MAX_S = 0.5


class ProjectionFeed:
    """`send(shard, tenant, recipients, event)` of one final dispatch record of `shard`;
    links to session owners (mutual TLS with `tls`, the peer must be a session
    certificate) are made on first use and run by `spawn(coro, name)` (the node's
    supervised tasks)."""

    def __init__(self, owners: OwnerTable, spawn: Callable[[Any, str], Any],
                 metrics: Optional[MailboxMetrics] = None, tls: Optional[TlsContexts] = None,
                 link_failures: Any = None) -> None:
        self._m = metrics if metrics is not None else MailboxMetrics()
        self._link_failures = link_failures  # qim_link_failures_total (qim/net/oneway.py)
        self._owners = owners
        self._spawn = spawn
        self._tls = tls
        self.links: dict[str, OneWayLink] = {}  # session node address -> its link

    def _dropped(self, reason: str) -> None:
        self._m.projection_dropped.inc()

    def _link(self, addr: str) -> OneWayLink:
        link = self.links.get(addr)
        if link is None:
            link = self.links[addr] = OneWayLink(addr, Opcode.PROJECTION, queue_limit=PEER_QUEUE_LIMIT,
                                                 on_drop=self._dropped, reconnect_max_s=RECONNECT_MAX_S,
                                                 name="projection", tls=self._tls, expect_service=SESSION)
            link.failures = self._link_failures
            self._spawn(link.run(), f"projection link {addr}")
        return link

    def send(self, shard: int, tenant: int, recipients: Sequence[int], event: MailboxEvent,
             trace_id: bytes = b"", mailbox_seq: int = 0) -> None:
        """PROJECTION of one record's message to its `recipients` (`event`: their event;
        `trace_id`: the message's, for the session's log lines; `mailbox_seq`: the
        record's in dispatch partition `shard`, 0 when unknown: the session then cannot
        skip it on its durable path, decision 0167). Never raises: it runs on the
        mailbox shard path, whose worker must not die for a best-effort optimisation."""
        try:
            self._send(shard, tenant, recipients, event, trace_id, mailbox_seq)
        except Exception:  # noqa: BLE001 — counted and logged; the durable path recovers
            self._m.projection_dropped.inc()
            logger.exception("PROJECTION frame not built")

    def _send(self, shard: int, tenant: int, recipients: Sequence[int], event: MailboxEvent, trace_id: bytes,
              mailbox_seq: int) -> None:
        owner = self._owners.owner("session", shard)
        if owner is None:
            self._m.projection_dropped.inc()  # no live owner now: its durable consumer catches up
            return
        frame = projection_pb2.Projection(tenant_id=tenant.to_bytes(16, "big"))
        # one message per record: every recipient's event has the same coordinates
        frame.messages.add(conversation_id=event.conversation_id, conversation_seq=event.conversation_seq,
                           created_at_ms=event.created_at_ms, sender_id=event.sender_id, users=recipients,
                           trace_id=trace_id, shard=shard, mailbox_seq=mailbox_seq)
        if self._link(owner.addr).send(frame.SerializeToString()) == SENT:
            self._m.projection_frames.inc()
