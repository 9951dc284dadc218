"""ReadPositionStore: read_conversation_seq per (user, conversation) (docs/design.md §6:
"per user (shared by devices) and only moves forward; sending marks the conversation
read up to the sent message" — the latter written by SessionStore.register).

Errors: StoreUnavailable.
"""

from __future__ import annotations

from typing import Protocol, Sequence


class ReadPositionStore(Protocol):
    """Read positions of the users a session node owns."""

    async def positions(self, tenant: int, user: int, conversation_ids: Sequence[bytes]) -> list[int]:
        """read_conversation_seq of each conversation (0 when never read)."""
        ...

    async def mark_read(self, tenant: int, user: int, conversation_id: bytes, seq: int) -> tuple[int, bool]:
        """Move the position forward to `seq` (never back): (absolute position after the
        call, whether it moved)."""
        ...
