"""NotifyStore: what the NotificationService keeps (docs/decisions/0135-notification-service.md;
the Redis implementation: qim/stores/redis/notify.py, whose module doc has the keys).

- the at-most-once record of an alert per (device, message): `claim` before the send,
  `renew` just before each request (decision 0144), `sent` after the provider accepted it
  (or gave it up for good);
- the highest badge version sent to each device (`badge_versions`): a late push never
  carries an older badge;
- the session projection's checkpoints and the badge's dirty marks, read to wait until a
  batch's messages are in the user's badge (`checkpoints`, `marked`);
- the users whose badge fell (`fell`, `fell_done`): their silent badge updates.

Errors: StoreUnavailable on an outage.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping, NamedTuple, Optional, Protocol, Sequence

ClaimState = Literal["new", "sent", "claimed"]


class AlertKey(NamedTuple):
    """One alert: a message to one device of a user."""

    user: int
    device: int
    message_id: bytes


class Fell(NamedTuple):
    """A user whose badge fell, as of badge `version` (`member`/`version` as stored)."""

    tenant: int
    user: int
    member: str
    version: str


class NotifyStore(Protocol):
    """The NotificationService's Redis state on the users' instances."""

    def clients(self) -> list[Any]:
        """The mailbox instances (each has its own fell HASH)."""
        ...

    async def checkpoints(self, shards: Sequence[int]) -> dict[int, int]:
        """{shard: the session projection's next dispatch offset} (-1: no checkpoint yet)."""
        ...

    async def marked(self, tenant: int, pairs: Sequence[tuple[int, bytes]]) -> set[tuple[int, bytes]]:
        """The (user, conversation) pairs whose badge mark is still unsettled."""
        ...

    async def claim(self, tenant: int, keys: Sequence[AlertKey], claim_ms: int, token: str = "c") -> list[ClaimState]:
        """Per key: "new" (claimed now for `claim_ms` by the attempt `token`, "c..."),
        "sent" (an alert was made before) or "claimed" (another attempt holds it: retry
        after its claim ends)."""
        ...

    async def renew(self, tenant: int, key: AlertKey, token: str, claim_ms: int) -> bool:
        """Just before a request: True when the claim is still the attempt `token`'s (held
        another `claim_ms`; taken again if it expired unclaimed), False when the alert was
        made or another attempt claimed it since (the request must not be made)."""
        ...

    async def sent(self, tenant: int, keys: Sequence[AlertKey]) -> None:
        """Record the alerts as made (kept SENT_TTL: a replay within it makes none)."""
        ...

    async def badge_versions(self, tenant: int, user: int, rows: Sequence[tuple[int, int, int]],
                             silent: bool) -> list[Optional[tuple[int, int]]]:
        """Per (device, version, badge): the (version, badge) to send — the given one, or
        for an alert a newer one already sent to the device — recording the highest;
        None for a silent update not newer than what the device was sent (skip it)."""
        ...

    async def badge_versions_of(self, tenant: int, rows: Mapping[int, Sequence[tuple[int, int, int]]],
                                silent: bool) -> dict[int, list[Optional[tuple[int, int]]]]:
        """`badge_versions` of many users ({user: rows}), in one round trip per instance
        (a batch's alerts: decision 0145)."""
        ...

    async def fell(self, client: Any, count: int) -> list[Fell]:
        """About `count` users of one instance whose badge fell (one HSCAN page)."""
        ...

    async def fell_done(self, client: Any, handled: Sequence[Fell]) -> None:
        """Drop the handled entries still at the version read."""
        ...
