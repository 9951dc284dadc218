"""ReactionStore: the durable half of reactions, the per-message aggregate
MessageReactionSummary (docs/protocol.md "Reactions and typing";
docs/decisions/0121-reactions-and-typing-are-ephemeral.md).

A reaction is the ephemeral_aggregate delivery kind: it never enters a mailbox and is
never a message. What is kept per message is emoji -> count and who reacted with what
(so adding and removing are idempotent per (user, message, emoji) and a reader's
summary says which emoji are its own). One change is one atomic script call (one round
trip); a page of summaries is one call too.

Errors: StoreUnavailable (and StoreCorrupt for a count that is not a number).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence

from qim.stores.messages import MessageRef


@dataclass(frozen=True)
class EmojiCount:
    """One emoji of a message: `count` users reacted with it (> 0); `mine`: the reader did."""

    emoji: str
    count: int
    mine: bool = False


@dataclass(frozen=True)
class Summary:
    """The aggregate of one message as one reader sees it: emoji by count, most first
    (ties by emoji), every count > 0. Empty: no reactions. `version` orders one message's
    summaries: +1 per change, assigned in the change's own atomic step, so the higher is
    the newer (0: no change since versions exist; decision 0121, amended: versions); it
    stays when the last reaction goes, so an empty summary may carry one."""

    counts: tuple[EmojiCount, ...] = ()
    version: int = 0


@dataclass(frozen=True)
class Change:
    """The outcome of one add or remove: `changed` False when it was already so (an
    idempotent repeat), `full` True when an add was refused because the message already
    has the cap of distinct emoji (nothing changed), and the summary after it."""

    changed: bool
    full: bool = False
    summary: Summary = field(default_factory=Summary)


class ReactionStore(Protocol):
    """Reaction aggregates, kept with the conversation's other keys (its commit bucket)."""

    async def change(self, tenant: int, conversation_id: bytes, message_id: bytes, user: int, emoji: str,
                     add: bool, max_distinct: int) -> Change:
        """Add (`add`) or remove `user`'s `emoji` on the message, atomically: a repeat
        changes nothing; an add of a new emoji when `max_distinct` are present is `full`.
        A change (only) bumps the summary's version in the same atomic step."""
        ...

    async def summaries(self, tenant: int, conversation_id: bytes, message_ids: Sequence[bytes],
                        reader: int) -> list[Summary]:
        """The summary of each message (same order) as `reader` sees it (one round trip)."""
        ...

    async def summaries_of(self, tenant: int, refs: Sequence[MessageRef], reader: int) -> list[Summary]:
        """The summary of each (conversation_id, message_id) of a mailbox page, of any
        conversations (same order), as `reader` sees it: one round trip per Redis
        instance holding some of them, never one per message."""
        ...
