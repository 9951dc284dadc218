"""What an applied change tells the app, in order (docs/design.md §9; seed 000 未读与已读).

Only after the SQLite commit, and for one apply always in this order:
ConversationsUpdated (the entries already count the batch), MessagesAdded,
MessagesUpdated, MessagesRemoved, PendingResolved, ReadPositionChanged,
MembershipChanged. An app that adds the MessagesAdded to the unread it was just given
counts them twice: it replaces its entries with the ones of ConversationsUpdated.
"""

from __future__ import annotations

from typing import Callable

from qim.sdk import events as ev
from qim.sdk.events import SendAck
from qim.sdk.model import ApplyResult


def tell(result: ApplyResult, read_source: str, emit: Callable[[ev.Event], None],
         resolve: Callable[[SendAck], bool]) -> int:
    """Emit the events of one committed apply and resolve the sends it reconciled
    (`resolve`: the SendLedger's one path, True when it settled a waiter); returns how
    many it settled (sends no SEND_ACK had settled: stats["reconciled"])."""
    changed = result.inserted + result.updated
    conv_ids = dict.fromkeys(m.conversation_id for m in changed)
    conv_ids.update(dict.fromkeys(c.conversation_id for c in result.conversations))
    if conv_ids:
        emit(ev.ConversationsUpdated(tuple(conv_ids), tuple(result.conversations)))
    if result.inserted:
        emit(ev.MessagesAdded(tuple(result.inserted)))
    if result.updated:
        emit(ev.MessagesUpdated(tuple(result.updated)))
    if result.removed:
        emit(ev.MessagesRemoved(tuple(result.removed)))
    settled = 0
    if result.resolved:
        acks = tuple(SendAck(r.client_message_id, r.message_id, r.conversation_id, r.conversation_seq,
                             r.created_at_ms, reconciled=True) for r in result.resolved)
        settled = sum(resolve(ack) for ack in acks)
        emit(ev.PendingResolved(acks))
    for conv, seq in result.reads:
        emit(ev.ReadPositionChanged(conv, seq, read_source))
    for change in result.membership:
        emit(ev.MembershipChanged(change))
    return settled
