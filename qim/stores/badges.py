"""BadgeStore: UserBadgeState, the user's global badge as an absolute value with a version
that only grows (docs/decisions/0129-user-badge-state.md; the Redis implementation:
qim/stores/redis/badges.py, whose module doc has the keys).

Errors: StoreUnavailable on an outage; NotOwner for a stale owner_epoch; StoreCorrupt
for a malformed dirty mark.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Protocol, Sequence


class Dirty(NamedTuple):
    """One (user, conversation) whose contribution is to be settled; `member` its mark's
    name and `generation` the mark's value as read (dropped only if still that)."""

    tenant: int
    user: int
    conversation_id: bytes
    member: str
    generation: str


class BadgeStore(Protocol):
    """UserBadgeState of the users on a deployment's mailbox instances."""

    dropped_marks: int  # malformed marks `dirty` deleted instead of returning

    def clients(self) -> list[Any]:
        """The instances, each with its own dirty marks (pass one to `dirty`)."""
        ...

    async def mark(self, tenant: int, user: int, conversation_ids: Sequence[bytes]) -> None:
        """Mark (user, conversation) to be settled again."""
        ...

    async def dirty(self, client: Any, count: int) -> list[Dirty]:
        """About `count` marks of one instance, page after page round the set; a
        malformed mark (or one of user 0) is deleted and counted in `dropped_marks`."""
        ...

    async def settle(
        self,
        shard: int,
        owner_epoch: int,
        tenant: int,
        user: int,
        values: dict[bytes, int],
        settled: Sequence[Dirty],
        wakes: Optional[dict[bytes, int]] = None,
    ) -> tuple[int, int, bool]:
        """Write the user's per-conversation contributions, the badge (their sum) and its
        version (raised when the badge changed); queue `wakes` ({conversation: ms}) to be
        marked again then; drop the `settled` marks not marked again; fenced by session
        shard `shard`'s owner_epoch. (badge, version, whether this call changed it)."""
        ...

    async def wake_due(self, client: Any, now_ms: int, count: int) -> int:
        """Mark again up to `count` queued wakes of one instance due by `now_ms`; how many."""
        ...

    async def badges_of(self, tenant: int, users: Sequence[int]) -> dict[int, tuple[int, int]]:
        """{user: (badge, version)}, (0, 0) for a user never settled."""
        ...
