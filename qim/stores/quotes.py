"""A reply's quote as it is read (docs/decisions/0134; issue 38).

The writer freezes a reply's quoted preview (ReplyRef) when the reply is sent (decision
0120). When the quoted message is later recalled by its sender or removed by an operator,
readers must not keep seeing its text in the quotes. So every read path that hands out
replies (PULL_HISTORY pages, resolved mailbox entries) passes them through `refresh`: the
current state of each quoted message that still has a preview is read in one
MessageStore.resolve call (states only: the MessageState, NORMAL unless recalled or
deleted) and a quote of a recalled or deleted message loses its preview and takes that
state. The cost is that one round trip, and only for a page holding a quote with a
preview; nothing is rewritten at the remove (no index of replies, no scan).
"""

from __future__ import annotations

from typing import Any, Sequence

from qim.stores.messages import MessageRef, MessageStore

__all__ = ["refresh"]


async def refresh(messages: MessageStore, tenant: int, items: Sequence[tuple[bytes, Any]]) -> int:
    """`items`: (conversation_id, HistoryItem or MailboxEntry) pairs, changed in place: a
    reply quoting a message now recalled or deleted gets that state and no preview.
    Returns how many quotes were cleared. StoreUnavailable / StoreCorrupt as resolve."""
    quoting = [(conv, item) for conv, item in items if item.HasField("reply") and item.reply.preview]
    if not quoting:
        return 0
    _, states = await messages.resolve(tenant, [], [MessageRef(conv, item.reply.message_id) for conv, item in quoting])
    cleared = 0
    for (_, item), state in zip(quoting, states):
        if state:  # recalled or deleted since the reply quoted it
            item.reply.state, item.reply.preview = state, ""
            cleared += 1
    return cleared
