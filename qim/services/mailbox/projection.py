"""Mailbox side of the low-latency Projection path, mailbox -> session (docs/design.md §5.4
last step, §6; seed 004 §5 "Projection → session（try_send，满则丢）").

After a dispatch record is final, one PROJECTION frame (opcode 0x7F07, one-way) per
session node that owns a recipient (or, for a direct message, the sender), over a
qim/net/oneway.py link per session node without a backlog. Never awaited on the shard
path; a session node that is down or has more than PEER_QUEUE_LIMIT bytes unread loses
the frame (counted in `qim_mailbox_projection_dropped_total`). Dropping is safe: the
session node's durable dispatch consumer registers the same messages with the same
script. The session side is qim/services/session/feed.py (ProjectionIntake).
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Optional

from qim._core import ids
from qim.consts import CONVERSATION_KIND_DIRECT
from qim.errors import IdError
from qim.net.oneway import PEER_QUEUE_LIMIT, SENT, OneWayLink
from qim.net.tls import TlsContexts
from qim.obs.logcontext import current
from qim.proto.v1 import projection_pb2
from qim.protocol import Opcode
from qim.services.mailbox.metrics import MailboxMetrics
from qim.topology import SESSION

logger = logging.getLogger(__name__)

RECONNECT_MAX_S = 0.5


class ProjectionFeed:
    """`send(tenant, items)` with items = [(user, [MailboxEvent])] of one final dispatch
    record; `links` are run by the node (one OneWayLink per session node, user u on node
    u mod n; mutual TLS with `tls`, the peer must be a session certificate)."""

    def __init__(self, session_addrs: Iterable[str], metrics: Optional[MailboxMetrics] = None,
                 tls: Optional[TlsContexts] = None) -> None:
        self._m = metrics if metrics is not None else MailboxMetrics()
        self.links = [OneWayLink(a, Opcode.PROJECTION, queue_limit=PEER_QUEUE_LIMIT, on_drop=self._dropped,
                                 reconnect_max_s=RECONNECT_MAX_S, name="projection", tls=tls,
                                 expect_service=SESSION) for a in session_addrs]

    def _dropped(self, reason: str) -> None:
        self._m.projection_dropped.inc()

    def send(self, tenant: int, items: Any) -> None:
        """Never raises: it runs on the mailbox shard path, whose worker must not die for
        a best-effort optimisation."""
        if not self.links:
            return
        try:
            self._send(tenant, items)
        except Exception:  # noqa: BLE001 — counted and logged; the durable path recovers
            self._m.projection_dropped.inc()
            logger.exception("PROJECTION frame not built")

    def _send(self, tenant: int, items: Any) -> None:
        n = len(self.links)
        trace = bytes.fromhex(current("trace"))  # the record's message (bound by the materializer)
        messages: dict[tuple, list[int]] = {}
        for user, events in items:
            for ev in events:
                key = (ev.conversation_id, ev.conversation_seq, ev.created_at_ms, ev.sender_id)
                messages.setdefault(key, []).append(user)
        frames: dict[int, projection_pb2.Projection] = {}
        for (conv, seq, created, sender), users in messages.items():
            targets = {u % n for u in users}
            try:
                if ids.conversation_kind(conv) == CONVERSATION_KIND_DIRECT:
                    targets.add(sender % n)
            except IdError:
                continue  # not a session conversation; the durable path reports corrupt records
            for node in targets:
                frame = frames.get(node)
                if frame is None:
                    frame = frames[node] = projection_pb2.Projection(tenant_id=tenant.to_bytes(16, "big"))
                frame.messages.add(conversation_id=conv, conversation_seq=seq, created_at_ms=created,
                                   sender_id=sender, users=sorted(set(users)), trace_id=trace)
        for node, frame in frames.items():
            if self.links[node].send(frame.SerializeToString()) == SENT:
                self._m.projection_frames.inc()
