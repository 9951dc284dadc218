"""ConversationStateStore: the user's own choices per conversation and the read-receipt
setting (UserConversationState of docs/design.md §6; docs/decisions/0122).

Per (user, conversation): `pinned`, `muted_until` (ms since the epoch; 0 not muted;
MUTE_FOREVER for ever) and `hidden_at` (0 = shown; else the conversation set score, the
created_at_ms of its newest message, when the user hid it: the conversation stays out of
the list while its score is not above it, so the next message unhides it without any
write on the message path), and `version`, which grows by one at every change so a
device can order the states it is told (docs/decisions/0157). Per user: `receipts`
(default on). Read positions stay in
ReadPositionStore, membership in GroupStore. Every value lives on the user's instance.

Errors: StoreUnavailable; StoreCorrupt for a value that is not the stored shape.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Protocol, Sequence

MUTE_FOREVER = (1 << 64) - 1  # muted_until meaning "for ever" (docs/protocol.md)


class ConvState(NamedTuple):
    """One conversation's choices; the default (all zero) is "never set"."""

    pinned: bool = False
    muted_until: int = 0
    hidden_at: int = 0
    version: int = 0  # grows by one at every change (docs/decisions/0157); 0 = never set


class StateChange(NamedTuple):
    """What SET_CONVERSATION_STATE changes (None keeps the stored value); `hide` True
    hides at the conversation's current score, False shows it again."""

    pinned: Optional[bool] = None
    muted_until: Optional[int] = None
    hide: Optional[bool] = None


class ConversationStateStore(Protocol):
    """UserConversationState choices and the receipts setting of users."""

    async def states(self, tenant: int, user: int, conversation_ids: Sequence[bytes]) -> list[ConvState]:
        """The state of each conversation (ConvState() when never set)."""
        ...

    async def change(self, tenant: int, user: int, conversation_id: bytes, change: StateChange) -> ConvState:
        """Apply `change` atomically (a hide reads the conversation's score in the same
        step); the absolute state after it."""
        ...

    async def receipts(self, tenant: int, users: Sequence[int]) -> list[bool]:
        """Each user's read-receipt setting (True unless turned off)."""
        ...

    async def set_receipts(self, tenant: int, user: int, enabled: bool) -> None:
        """Keep the user's read-receipt setting."""
        ...

    async def receipt_positions(self, tenant: int, pairs: Sequence[tuple[int, bytes]]) -> list[tuple[int, bool]]:
        """(read_conversation_seq, receipts on) of each (user, conversation_id): what a
        read receipt shows (one round trip per instance holding some of the users)."""
        ...

    async def read_states(self, tenant: int, pairs: Sequence[tuple[int, bytes]]) -> list[tuple[int, ConvState]]:
        """(read_conversation_seq, ConvState) of each (user, conversation_id): what decides
        whether a message is still unread and muted for the user (the NotificationService's
        verdicts, docs/decisions/0145), in one round trip per instance holding some of the users."""
        ...
