"""QIM client SDK (DESIGN.md §9): ClientRuntime over a SQLite LocalStore.

    store = LocalStore.open(LocalStore.path_for(base, "127.0.0.1:7000", tenant, user), tenant, user)
    rt = ClientRuntime("127.0.0.1:7000", token, store)
    await rt.connect()
    ack = await rt.send_message(direct_conversation(tenant, user, peer), peer, b"hi")
"""

from __future__ import annotations

from qim._core import ids
from qim.sdk.events import (ConnectionLost, ConversationsUpdated, Kicked, MessagesAdded, MessagesRemoved,
                            MessagesUpdated, NotConnected, PendingResolved, SendAck, SendFailed, SendRefused,
                            SendTimeout, ServerError, SyncFailed)
from qim.sdk.runtime import ClientRuntime
from qim.sdk.store import LocalStore, StoredMessage, StoreError


def direct_conversation(tenant: int, user_a: int, user_b: int) -> bytes:
    """The 16-byte direct conversation_id of two users (ids.conversation_id_direct, DESIGN.md §3)."""
    return ids.conversation_id_direct(tenant, user_a, user_b)


__all__ = [
    "ClientRuntime", "LocalStore", "StoredMessage", "StoreError", "SendAck", "ServerError", "ConnectionLost",
    "NotConnected", "Kicked", "SendTimeout", "SendRefused", "ConversationsUpdated", "MessagesAdded",
    "MessagesUpdated", "MessagesRemoved", "PendingResolved", "SendFailed", "SyncFailed", "direct_conversation",
]
