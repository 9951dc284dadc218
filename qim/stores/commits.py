"""CommitStore: the commit state machine of the MessageCommitter (docs/design.md §5.2,
docs/decisions/0002-commit-keys.md, 0017-writer-order-and-time.md).

ABSENT → RESERVED → RECORDED → (OUTBOXED) → COMMITTED. A reserving call is ONE atomic
operation: idempotency on (tenant, sender, cmid) by a 36-byte identity digest (same
digest: the existing commit is returned; another digest: Conflict), the reservation
checks (the device's previous send is sequenced, the message_id is not below the
conversation's newest one), INCR of conversation_seq, the frozen audience, the canonical
MessageRecord and its history index entry, the in-flight and unpublished indexes. The
group change and the state change (recall/delete) add their own writes to the same
operation. All validation happens before the sequence is taken.

Errors: StoreUnavailable; Conflict, Forbidden, NotFound (group change: no such group),
MembershipMoved, RecordChanged, ClockBehind(message_id), PreviousNotSequenced, Revoked
(sends), RefusalKept (a send the send policy refused before) from the reserving calls;
NotFound / NotRecorded from `mark_committed`.

The send policy's refusals are kept here too, beside the commit keys of the same
(tenant, conversation, sender, cmid) and in the same commit bucket (docs/decisions/0099,
Amendment): `refuse` keeps one unless a commit exists, a reserve with `policy_checked`
reads it in the same atomic call, `refusal` reads it alone (a held send).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Optional, Protocol, Sequence

from qim.consts import UNPUBLISHED_SCAN_MAX
from qim.errors import ErrorCode
from qim.stores.errors import StorageError

RESERVED, RECORDED, COMMITTED = "RESERVED", "RECORDED", "COMMITTED"


class RefusalKept(StorageError):
    """The send policy refused this (sender, client_message_id) before and the refusal is
    kept (docs/decisions/0099, Amendment): the retry gets the same POLICY_REFUSED, its
    message the kept reason, whatever the policy answers now. Nothing was reserved."""

    code = ErrorCode.POLICY_REFUSED


class CommitRef(NamedTuple):
    """One commit: (tenant, conversation, sender, client_message_id)."""

    tenant: int
    conversation_id: bytes
    sender_id: int
    client_message_id: bytes


@dataclass
class Reservation:
    """What every reserving call takes. `record_prefix`: the serialized MessageRecord
    without conversation_seq (the store appends it: qim/wire/outbox.stored_record);
    `audience`: the serialized OutboxRecord without its record (opaque to the store);
    `split`: fault-injection mode, stop at RESERVED (the record step is `record`);
    no time of the caller's clock: the store stamps the in-flight index with its own
    (docs/decisions/0032);
    `writer_token`: owner of this process's reservations in the unpublished index;
    `list_older`: list every older unpublished commit even when only this writer has
    some; `previous`: cmid of the device's previous send ("" = none); `device_id` and
    `token_iat` (unix s, 0 = no token: the admin plane): a send is refused (Revoked) when
    the token was issued at or before the device's or the user's revocation cutoff
    (docs/decisions/0080-revocation-checked-at-commit.md); `policy_checked`: the send
    policy was asked (a policy is configured), so a kept refusal of this send refuses the
    reserve (RefusalKept) in the same call; False (no policy) reads nothing more."""

    ref: CommitRef
    digest: bytes
    message_id: bytes
    created_at_ms: int
    record_prefix: bytes
    audience: bytes
    writer_token: str
    split: bool = False
    list_older: bool = False
    previous: bytes = b""
    older_max: int = UNPUBLISHED_SCAN_MAX
    device_id: int = 0
    token_iat: int = 0
    policy_checked: bool = False


@dataclass(frozen=True)
class GroupSendCheck:
    """A group send: `actor` must be a current member and `version` still the group's
    membership_version (else Forbidden / MembershipMoved)."""

    version: int
    actor: int


@dataclass
class GroupChange:
    """A membership change (docs/design.md §7): `op` "create" (Conflict when the group exists)
    or "edit" (NotFound without a group, MembershipMoved when `expected_version` moved).
    The message's seq J gives joiners joined_at = J-1 (0 on create) and leavers left_at =
    J; a member keeps at most `intervals_kept` intervals; `members_after` is stored as the
    immutable snapshot of the new version for `snapshot_ttl_s`. `title` is the group's
    title set on create; op "title" sets only the title (members and version unchanged;
    NotFound / MembershipMoved as for "edit")."""

    op: str
    expected_version: Optional[int]
    actor: int
    members_after: Sequence[int]
    group_id: int
    snapshot_ttl_s: int
    intervals_kept: int
    joins: Sequence[int] = ()
    leaves: Sequence[int] = ()
    title: str = ""


@dataclass
class StateChange:
    """Recall/delete of `message_id` (same conversation): rewrite it as `new_record` and
    mark its state (RecordChanged when it no longer is the stored `expected_version`);
    an edit (docs/decisions/0120) has state NORMAL: the record is rewritten, no state set;
    with `group_version` set, `actor` must be a current member at that version."""

    message_id: bytes
    expected_version: str
    new_record: bytes
    state: int
    group_version: Optional[int] = None
    actor: int = 0
    # a recall of an edited message: (message_id, rewritten record bytes) of each CONTROL
    # message that announced an edit, marked with `state` too (docs/decisions/0120)
    also: Sequence[tuple[bytes, bytes]] = ()


@dataclass
class Reserved:
    """A reserving call's answer. `fresh`: this call reserved (else the existing commit
    of the same request); `older`: unpublished commits below this one, (ref, seq), that
    the caller publishes first (Outbox order = conversation_seq order)."""

    fresh: bool
    state: str
    message_id: bytes
    conversation_seq: int
    created_at_ms: int
    older: list[tuple[CommitRef, int]] = field(default_factory=list)


@dataclass
class LoadedCommit:
    """A commit as stored, for resumption: `record` is the canonical record bytes (from
    the commit itself while RESERVED), `audience` None once COMMITTED."""

    state: str
    message_id: bytes
    conversation_seq: int
    created_at_ms: int
    audience: Optional[bytes]
    record: Optional[bytes]


@dataclass
class Committed:
    """ACK coordinates of a COMMITTED commit."""

    message_id: bytes
    conversation_seq: int
    created_at_ms: int


@dataclass
class CommitReply:
    """The identity and progress of a stored commit (operation replays)."""

    digest: bytes
    state: str
    conversation_seq: int


@dataclass
class StaleScan:
    """In-flight commits not updated since the cutoff, as (ref, seq), and how many were
    left in place because their record is unreadable (logged by the caller)."""

    commits: list[tuple[CommitRef, int]]
    unreadable: int = 0


class CommitStore(Protocol):
    """Commit state of every conversation (one commit bucket per conversation)."""

    async def reserve(self, res: Reservation, group: Optional[GroupSendCheck] = None) -> Reserved:
        """Reserve and record a send (direct, or a group send checked by `group`)."""
        ...

    async def reserve_group_change(self, res: Reservation, change: GroupChange) -> Reserved:
        """Reserve a membership change's CONTROL message and apply the change."""
        ...

    async def reserve_state_change(self, res: Reservation, change: StateChange) -> Reserved:
        """Reserve a recall/delete CONTROL message and rewrite the target."""
        ...

    async def record(self, ref: CommitRef, message_id: bytes) -> str:
        """RESERVED → RECORDED (split mode; idempotent) of the commit reserving
        `message_id`: the state after the call.
        NotFound when the commit vanished."""
        ...

    async def mark_committed(self, ref: CommitRef, outbox_offset: int, ttl_ms: int) -> Committed:
        """The Outbox record is durable: COMMITTED, shrink to the ACK coordinates, expire
        `ttl_ms` from now by the store's clock (relative: never an absolute time of the
        caller's clock, docs/decisions/0032), leave the in-flight and unpublished indexes
        (idempotent). NotFound when the commit vanished, NotRecorded while RESERVED."""
        ...

    async def load(self, refs: Sequence[CommitRef]) -> list[Optional[LoadedCommit]]:
        """Each commit as stored (None when absent), a fixed number of round trips."""
        ...

    async def unpublished(self, tenant: int, conversation_id: bytes, upto_seq: int,
                          limit: int) -> list[tuple[CommitRef, int]]:
        """The conversation's reserved commits not yet known durable, seq <= upto_seq,
        ascending, at most `limit`."""
        ...

    async def stale(self, older_than_ms: int, per_bucket: int) -> StaleScan:
        """In-flight commits not updated for `older_than_ms` by the store's own clock (at
        most `per_bucket` per commit bucket; the age of a commit reserved by a writer
        whose clock is off is still its real age); entries whose commit vanished are
        removed from the index."""
        ...

    async def reply_of(self, ref: CommitRef) -> Optional[CommitReply]:
        """Identity digest, state and seq of a stored commit; None when absent."""
        ...

    async def exists(self, ref: CommitRef) -> bool:
        """Whether the commit holds state (an idempotent replay)."""
        ...

    async def refuse(self, ref: CommitRef, digest: bytes, reason: str, ttl_ms: int) -> Optional[str]:
        """Keep the send policy's refusal of `ref` (identity digest `digest`, `reason`) for
        `ttl_ms` by the store's clock, atomically unless a commit of `ref` exists. Returns
        the reason that stands: an earlier kept refusal's (the first answer stands) or
        `reason`; None when a commit exists (its acceptance stands, nothing written).
        Conflict when a refusal of `ref` with another digest is kept."""
        ...

    async def refusal(self, ref: CommitRef, digest: bytes) -> Optional[str]:
        """The reason of the kept refusal of `ref`, None when none is kept; Conflict when
        it was kept for another digest."""
        ...

    async def inflight_count(self) -> int:
        """Commits not yet COMMITTED, over every bucket (qimctl's drain wait)."""
        ...
