"""SessionStore: conversation sets, direct peers and the durable projection's checkpoint
(docs/design.md §6; seed 000 会话列表, seed 004 §6; docs/decisions/0006-session-projection.md).

A user's conversation set orders its conversations by the created_at_ms of the newest
message seen (only grows). A registration (one committed message for one user) is ONE
order-independent write used by both projection paths (durable dispatch consumer, the
mailbox's low-latency Projection): the set (greater-than only), the read position when the
user sent the message ("sending marks the conversation read", the ReadPositionStore's
value moved forward only) and the direct peer (set once). The seed lost registrations
when the two paths wrote differently.

Conversation set members are the conversation_id as 32 lowercase hex ASCII bytes (the
session list cache's key form); scores are created_at_ms.

The durable projection keeps one checkpoint per session shard (the dispatch partition
of the same number: docs/design.md §13), bound to "<cluster_id>|<topic_id>|<partitions>" of
the dispatch topic, holding the next offset of that partition and fenced by the shard
owner's owner_epoch (docs/decisions/0040-scale-leases-and-fencing.md): the owner fences
it when it binds, and every advance carries the same epoch.

Errors: StoreUnavailable (ShardsUnavailable from `project` when only some shards were
written); NotOwner (its `shard` set) for a stale owner_epoch;
CheckpointConflict when an advance finds other values; StoreCorrupt for a checkpoint
without its offset.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Optional, Protocol, Sequence


class Registration(NamedTuple):
    """One (user, conversation) registration. own_seq: the conversation_seq when the user
    sent the message, else 0. peer: the other participant of a direct conversation when
    known, else 0."""

    tenant: int
    user: int
    conversation_id: bytes
    created_at_ms: int
    own_seq: int
    peer: int


class FirstSeen(NamedTuple):
    """A conversation in a user's set, as the archive tier's ConversationStateStore
    keeps it (user_conversation_state): kind (1 direct, 2 group), the direct peer (0 when
    unknown or a group) and when it was first registered (created_at_ms of that message)."""

    tenant: int
    user: int
    conversation_id: bytes
    kind: int
    peer: int
    first_seen_at_ms: int


@dataclass
class Checkpoint:
    """`status`: "NEW" (created at offset 0), "OK" (resumed) or "MISMATCH" (bound to
    `binding` as stored, which differs); `offsets`: the next offset of each partition it
    covers (one for a session shard's checkpoint)."""

    status: str
    binding: str = ""
    offsets: list[int] = field(default_factory=list)


class SessionStore(Protocol):
    """Session state of the users a session node owns."""

    async def register(self, regs: Sequence[Registration]) -> int:
        """Write every registration (one round trip for all); how many conversations were
        new for their user."""
        ...

    async def conversations(self, tenant: int, user: int) -> list[tuple[int, bytes]]:
        """The whole conversation set as (score, member), ascending."""
        ...

    async def checked_conversations(self, tenant: int, user: int) -> tuple[list[tuple[int, bytes]], bool]:
        """`conversations` and whether the set was checked against the archive tier's
        user_conversation_state since Redis last lost it (`mark_checked`), in one round
        trip (docs/decisions/0065)."""
        ...

    async def mark_checked(self, tenant: int, user: int, at_least: int) -> bool:
        """Record that the user's set holds every conversation of user_conversation_state,
        only while it holds at least `at_least` members (a set lost since the check is
        not marked); whether it was marked."""
        ...

    async def scores(self, tenant: int, user: int, members: Sequence[bytes]) -> list[Optional[int]]:
        """The score of each member (None when not in the set)."""
        ...

    async def listed(self, tenant: int, user: int, conversation_id: bytes) -> bool:
        """Whether the conversation is in the user's set."""
        ...

    async def peers(self, tenant: int, user: int, conversation_ids: Sequence[bytes]) -> list[int]:
        """The recorded direct peer of each conversation (0 when unknown)."""
        ...

    async def set_display_name(self, tenant: int, user: int, name: str) -> None:
        """Keep `name` as the user's display name ("" removes it; docs/protocol.md "Names")."""
        ...

    async def display_names(self, tenant: int, users: Sequence[int]) -> list[str]:
        """Each user's display name, "" when none is known (one round trip)."""
        ...

    async def pending_first(self, limit: int) -> list[FirstSeen]:
        """First registrations waiting for CQL user_conversation_state (the archive tier, docs/decisions/0023; queued
        by `register` only when the archive tier is configured), oldest first."""
        ...

    async def done_first(self, rows: Sequence[FirstSeen]) -> None:
        """Drop rows of `pending_first` once they are in CQL."""
        ...

    async def checkpoint_bind(self, shard: int, binding: str, owner_epoch: int, tenure: str = "") -> Checkpoint:
        """Fence session shard `shard` at `owner_epoch` (NotOwner when a higher one is
        there) and name this acquisition `tenure` (a token unique to it, "" none), then
        create its checkpoint at offset 0 when absent, else resume it (MISMATCH when
        bound to something else). Writes naming an earlier tenure are refused from then
        on (issue 33: the same owner taking a shard back keeps its owner_epoch)."""
        ...

    async def checkpoint_advance(self, shard: int, binding: str, owner_epoch: int, expected: int, new: int,
                                 tenure: str = "") -> None:
        """Compare-and-set the shard's next offset from `expected` to `new`; a retry whose
        value is already stored (a lost reply) succeeds. NotOwner for a stale epoch or
        tenure (`tenure` "" is not checked), else CheckpointConflict (another writer, or rebound)."""
        ...

    async def project(self, binding: str, moves: dict[int, tuple[int, int, int]],
                      regs: Sequence[Registration], tenures: Optional[dict[int, str]] = None) -> int:
        """One durable projection batch: write every registration, then compare-and-set
        each shard's checkpoint, `moves` = {shard: (owner_epoch, expected, new)}, under
        `tenures` = {shard: the tenure its checkpoint was bound with} when given, as
        `checkpoint_advance` (same errors, a lost reply's retry passes), in one round
        trip; no checkpoint moves unless every registration was written. How many
        conversations were new for their user. A backend whose shards live apart
        (several Redis instances, docs/decisions/0097) keeps this per shard: a shard's
        checkpoint moves only after every registration its records produced, and a
        refusal of one shard's checkpoint may leave another's moved. When one of its
        instances is unavailable it writes every shard that does not need that
        instance and raises ShardsUnavailable naming the shards it did not write
        (the rest were written; the caller retries only those)."""
        ...
