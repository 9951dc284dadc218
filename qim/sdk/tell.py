"""What an applied change tells the app, in order (docs/design.md §9; seed 000 未读与已读).

Only after the SQLite commit, and for one apply always in this order:
ConversationsUpdated (the entries already count the batch), MessagesAdded,
MessagesUpdated, MessagesRemoved, PendingResolved, ReadPositionChanged,
MembershipChanged. An app that adds the MessagesAdded to the unread it was just given
counts them twice: it replaces its entries with the ones of ConversationsUpdated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qim.sdk import events as ev
from qim.sdk.events import SendAck
from qim.sdk.model import ApplyResult

if TYPE_CHECKING:
    from qim.sdk.runtime import ClientRuntime


def tell(rt: "ClientRuntime", result: ApplyResult, read_source: str = "local") -> None:
    """Emit the events of one committed apply and settle the sends it resolved."""
    changed = result.inserted + result.updated
    conv_ids = dict.fromkeys(m.conversation_id for m in changed)
    conv_ids.update(dict.fromkeys(c.conversation_id for c in result.conversations))
    if conv_ids:
        rt._emit(ev.ConversationsUpdated(tuple(conv_ids), tuple(result.conversations)))
    if result.inserted:
        rt._emit(ev.MessagesAdded(tuple(result.inserted)))
    if result.updated:
        rt._emit(ev.MessagesUpdated(tuple(result.updated)))
    if result.removed:
        rt._emit(ev.MessagesRemoved(tuple(result.removed)))
    if result.resolved:
        acks = tuple(SendAck(r.client_message_id, r.message_id, r.conversation_id, r.conversation_seq,
                             r.created_at_ms, reconciled=True) for r in result.resolved)
        for ack in acks:  # counts only sends that no SEND_ACK had settled
            rt._sender.resolved(ack.client_message_id)
            rt.stats["reconciled"] += rt._settle(ack.client_message_id, ack=ack)
        rt._emit(ev.PendingResolved(acks))
    for conv, seq in result.reads:
        rt._emit(ev.ReadPositionChanged(conv, seq, read_source))
    for change in result.membership:
        rt._emit(ev.MembershipChanged(change))
