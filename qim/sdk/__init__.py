"""QIM client SDK (docs/design.md §9; docs/sdk.md): `Client`, the one object an app holds,
over ClientRuntime (the connection state machine) and LocalStore (SQLite).

Runs as written against a running stack (`make up`, then
`set -a; . .qim/stack/stack.env; set +a`; a test executes it):

    import asyncio, os, random, tempfile
    from qim.sdk import Client, MessagesAdded
    from qim.wire.devtoken import issue_dev_token

    async def main():
        endpoint = os.environ["QIM_GATEWAY_ADDR"]
        key = os.environ["QIM_DEV_TOKEN_KEY"]  # path of the development key
        alice, bob = random.sample(range(1, 1 << 40), 2)  # user ids of tenant 0
        with tempfile.TemporaryDirectory() as data_dir:
            a = await Client.open(endpoint, issue_dev_token(key, 0, alice, 1), data_dir=data_dir)
            b = await Client.open(endpoint, issue_dev_token(key, 0, bob, 1), data_dir=data_dir)
            await a.connect()
            await b.connect()
            chat = await a.open_direct(bob)
            await a.send_text(chat.conversation_id, "你好, Bob 👋")
            while not isinstance(event := await b.events.get(), MessagesAdded):
                pass
            print(event.messages[0].body.decode())  # 你好, Bob 👋
            (conv,) = await b.conversations()
            print(conv.unread, conv.unread_exact)  # 1 True
            await a.close()
            await b.close()

    asyncio.run(main())
"""

from __future__ import annotations

from qim._core import ids
from qim.errors import IdError, TlsError
from qim.sdk.client import Client, Member
from qim.sdk.convstate import MUTE_FOREVER, ConversationState, Readers
from qim.sdk.events import (
    BadgeChanged,
    Banned,
    ConnectionLost,
    ConnectionState,
    ConversationStateChanged,
    ConversationsUpdated,
    Kicked,
    KickedEvent,
    MembershipChanged,
    MessagesAdded,
    MessagesRemoved,
    MessagesUpdated,
    NotConnected,
    PeerRead,
    PendingResolved,
    PolicyRefused,
    ReadPositionChanged,
    Recalled,
    SendAck,
    SendFailed,
    SendPending,
    SendRefused,
    SendTimeout,
    ServerError,
    SyncFailed,
)
from qim.sdk.identity import DeviceIdentity, default_data_dir, device_identity
from qim.sdk.media import MediaRefused, MediaUnavailable
from qim.sdk.model import Conversation, LastMessage, Membership
from qim.sdk.push import PushInvalid, PushRegistration
from qim.sdk.room_events import RoomAck, RoomEventsAdded, RoomInfo, RoomMessage, RoomStateChanged
from qim.sdk.runtime import ClientRuntime
from qim.sdk.store import LocalStore, StoredMessage, StoreError


def direct_conversation(tenant: int, user_a: int, user_b: int) -> bytes:
    """The 16-byte direct conversation_id of two users (ids.conversation_id_direct, docs/design.md §3)."""
    return ids.conversation_id_direct(tenant, user_a, user_b)


__all__ = [
    "Client", "Member", "Conversation", "LastMessage", "Membership", "DeviceIdentity", "device_identity",
    "default_data_dir", "ClientRuntime", "LocalStore", "StoredMessage", "StoreError", "SendAck", "Recalled", "ServerError", "PolicyRefused",
    "ConnectionLost", "NotConnected", "Kicked", "KickedEvent", "SendTimeout", "SendRefused", "ConnectionState",
    "ConversationsUpdated", "MessagesAdded", "MessagesUpdated", "MessagesRemoved", "PendingResolved", "SendPending",
    "SendFailed", "SyncFailed", "ReadPositionChanged", "MembershipChanged", "direct_conversation", "TlsError",
    "IdError", "RoomAck", "RoomEventsAdded", "RoomInfo", "RoomMessage", "RoomStateChanged",
    "ConversationState", "ConversationStateChanged", "PeerRead", "Readers", "MUTE_FOREVER",
    "PushInvalid", "PushRegistration", "BadgeChanged", "Banned", "MediaRefused",
    "MediaUnavailable",
]
