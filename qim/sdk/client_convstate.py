"""Pin, mute, hide and read receipts of the app-facing Client (qim/sdk/client.py;
docs/sdk.md "Pin, mute, hide", "Read receipts"; docs/decisions/0122). The state itself
is qim/sdk/convstate.py.
"""

from __future__ import annotations

from typing import Optional

from qim.sdk.convstate import MUTE_FOREVER, ConversationState, ConvStates, Readers
from qim.sdk.store import LocalStore


class ConversationChoices:
    """The conversation-state calls of Client, which provides `store` and `convstates`."""

    store: LocalStore
    convstates: ConvStates

    async def _peer(self, conversation_id: bytes) -> int:
        return await self.store.run(self.store.peer_of, bytes(conversation_id))

    def conversation_state(self, conversation_id: bytes) -> ConversationState:
        """The user's choices and the marks of a conversation as last told (pinned,
        muted_until, hidden, mentioned, peer_read_seq; defaults when none is known)."""
        return self.convstates.get(conversation_id)

    async def pin(self, conversation_id: bytes, pinned: bool = True) -> ConversationState:
        """Pin (or unpin) the conversation for every device of the user: pinned ones
        come first in `conversations()`. ServerError (FORBIDDEN, NOT_FOUND), NotConnected."""
        return await self.convstates.change(conversation_id, await self._peer(conversation_id), pinned=pinned)

    async def mute(self, conversation_id: bytes, until_ms: Optional[int] = None) -> ConversationState:
        """Mute until `until_ms` (ms since the epoch; None: for ever). A muted conversation
        keeps its unread count; a mention of the user still sets `mentioned`."""
        until = MUTE_FOREVER if until_ms is None else int(until_ms)
        if until <= 0:
            raise ValueError("until_ms must be a time in ms since the epoch (use unmute to unmute)")
        return await self.convstates.change(conversation_id, await self._peer(conversation_id), muted_until=until)

    async def unmute(self, conversation_id: bytes) -> ConversationState:
        """End a mute."""
        return await self.convstates.change(conversation_id, await self._peer(conversation_id), muted_until=0)

    async def hide(self, conversation_id: bytes, hidden: bool = True) -> ConversationState:
        """Hide (archive) the conversation from `conversations()` on every device until
        a newer message arrives (`hidden=False` shows it again at once)."""
        return await self.convstates.change(conversation_id, await self._peer(conversation_id), hidden=hidden)

    async def hidden_conversations(self) -> list:
        """The conversations hidden now (newest activity first)."""
        listing = await self.store.run(self.store.conversations, None)
        return [c for c in listing if self.convstates.hidden(c)]

    async def set_read_receipts(self, enabled: bool) -> bool:
        """Turn the user's read receipts on or off (for every device; symmetric: off, the
        user's reads reach nobody and the user sees nobody's). Returns the setting."""
        return await self.convstates.receipts(bool(enabled))

    async def read_receipts(self) -> bool:
        """The user's read-receipt setting as the server holds it."""
        return await self.convstates.receipts(None)

    async def readers(self, conversation_id: bytes, conversation_seq: int) -> Readers:
        """Who read the message at `conversation_seq` (direct, or a group of at most
        100 members). ServerError FORBIDDEN (receipts off, larger group, not a member)."""
        return await self.convstates.readers(conversation_id, conversation_seq, await self._peer(conversation_id))
