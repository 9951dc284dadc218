"""Interfaces of the archive tier (docs/decisions/0023-archive-tier.md; docs/design.md §5 step 7, §8; seed 000 ADR-0018,
seed 004 §3; docs/decisions/0023-archive-tier.md).

Three stores besides the MessageStore read side (qim/stores/messages.py):

| interface | backend | what |
|---|---|---|
| ArchiveStore | CQL | the HistoryArchiver's idempotent writes; what the trimmer and the audit check |
| ConversationStateStore | CQL | user_conversation_state: first registrations of SessionProjection |
| ArchiveStateStore | Redis | archiver position and archive watermark, retention classes, hot floors, the trim queue and the trim itself |
| HotHistory | Redis | history reads consistent with the hot floor (the TieredMessageStore's hot half) |

Errors: the typed errors of qim/stores/errors.py only (StoreUnavailable: retry;
StoreCorrupt: stored data is not what the contract says; CheckpointConflict for the
archiver position).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Optional, Protocol, Sequence

from qim.proto.v1 import message_pb2
from qim.stores.intervals import Interval
from qim.stores.messages import MessageRef, TailQuery, VersionedRecord
from qim.stores.sessions import Checkpoint, FirstSeen


@dataclass
class ArchiveRecord:
    """One message to archive as the Outbox carried it; `ttl_s` 0 = never expires."""

    record: message_pb2.MessageRecord
    ttl_s: int


@dataclass
class ArchiveStateChange:
    """A recall/delete announced by a CONTROL message: the target's row is written again
    with `state` and no body, at a write time after its original (`changed_at_ms`: the
    CONTROL message's created_at), with the target's own expiry (`ttl_s`)."""

    tenant: int
    conversation_id: bytes
    message_id: bytes
    conversation_seq: int
    state: int
    changed_at_ms: int
    ttl_s: int
    # an edit (state NORMAL, version > 0; docs/decisions/0120): the row takes this body,
    # version and edit time instead of a state
    body: bytes = b""
    version: int = 0
    edited_at_ms: int = 0
    edit_control: bytes = b""  # the edit's CONTROL message_id (added to the row's edit_controls)


class ArchivedRow(NamedTuple):
    """What the history index holds at one seq: message_id, state, whether whole."""

    message_id: bytes
    state: int
    complete: bool


class ArchiveStore(Protocol):
    """The CQL side of archiving (every write idempotent: same values, same write time)."""

    async def write(self, tenant: int, records: Sequence[ArchiveRecord],
                    changes: Sequence[ArchiveStateChange]) -> None:
        """Records and state changes first, then the history index: an index row is never
        visible without its record (and a CONTROL's index row never before its state
        change). Returns once every row is acknowledged; StoreUnavailable otherwise
        (nothing is lost: the caller writes the batch again)."""
        ...

    async def archived(self, tenant: int, conversation_id: bytes, lo: int, hi: int) -> dict[int, ArchivedRow]:
        """History index rows with lo < conversation_seq <= hi (expired rows are absent)."""
        ...

    async def records(self, tenant: int, message_ids: Sequence[bytes]) -> list[Optional[message_pb2.MessageRecord]]:
        """The record of each id (None when absent or expired); StoreCorrupt when partial."""
        ...

    async def history_rows(self, tenant: int, conversation_id: bytes,
                           seqs: Sequence[int]) -> dict[int, Optional[message_pb2.MessageRecord]]:
        """The history index's whole record at each seq (None when absent; the audit)."""
        ...


class ConversationStateStore(Protocol):
    """user_conversation_state in CQL: the durable list of a user's conversations."""

    async def register(self, rows: Sequence[FirstSeen]) -> None:
        """Write every row (idempotent)."""
        ...

    async def conversations(self, tenant: int, user: int) -> list[FirstSeen]:
        """Every conversation registered for the user."""
        ...


@dataclass
class HotRow:
    """A message above the hot floor: seq, id and its state in Redis."""

    conversation_seq: int
    message_id: bytes
    state: int


@dataclass
class TrimResult:
    """The floor after a trim step and how many messages left Redis."""

    floor: int
    trimmed: int


class ArchiveStateStore(Protocol):
    """Archive state in Redis (the hot tier's side of archiving)."""

    async def position_bind(self, binding: str, partition: int = 0, owner_epoch: int = 0) -> Checkpoint:
        """The archiver's position in Outbox `partition` bound to "<cluster_id>|<topic_id>|
        <partitions>" and fenced at the partition owner's `owner_epoch` (NotOwner when a
        higher one is there; docs/decisions/0040-scale-leases-and-fencing.md): created at
        offset 0 when absent (status NEW), else resumed (OK) or MISMATCH."""
        ...

    async def position(self, partition: int = 0) -> Optional[int]:
        """The archiver's next offset in `partition`, None when never bound (read only: audits)."""
        ...

    async def position_advance(self, binding: str, expected: int, new: int, partition: int = 0,
                               owner_epoch: int = 0) -> None:
        """Compare-and-set of the partition's next offset by its owner; a retry finding
        `new` stored passes. NotOwner for a stale owner_epoch, CheckpointConflict otherwise."""
        ...

    async def watermark(self) -> int:
        """The archive watermark in ms (0: nothing archived yet): the lowest over the
        Outbox partitions."""
        ...

    async def advance_watermark(self, t0_ms: int, partition: int = 0, partitions: int = 1) -> int:
        """Move `partition`'s watermark to `t0_ms` unless already higher, then the archive
        watermark to the lowest of the `partitions`; the archive watermark after."""
        ...

    async def retention_classes(self, tenant: int, conversation_ids: Sequence[bytes]) -> list[str]:
        """The retention class of each conversation ("default" when none was set)."""
        ...

    async def set_retention(self, tenant: int, conversation_id: bytes, name: str) -> None:
        """Set a conversation's class (ValueError for an unknown one)."""
        ...

    async def mark_archived(self, tenant: int, oldest: dict[bytes, int]) -> None:
        """conversation -> created_at_ms of its oldest message just archived: queue it
        for the trimmer (kept at its earliest time)."""
        ...

    async def trim_candidates(self, upto_ms: int, limit: int) -> list[tuple[int, bytes]]:
        """(tenant, conversation) queued with a time <= upto_ms, oldest first."""
        ...

    async def hot_rows(self, tenant: int, conversation_id: bytes, limit: int) -> tuple[int, list[HotRow]]:
        """The hot floor and the oldest `limit` messages above it, ascending."""
        ...

    async def trim(self, tenant: int, conversation_id: bytes, rows: Sequence[HotRow]) -> TrimResult:
        """Atomically raise the floor over the longest prefix of `rows` still stored as
        given (id, seq, state) and delete them from Redis; requeue the conversation at its
        next message's time (or drop it when none is left)."""
        ...

    async def archived_states(self, tenant: int, conversation_id: bytes) -> list[tuple[int, bytes, int]]:
        """Recalls/deletes of already trimmed messages not yet dropped by a trim:
        (seq of the CONTROL message, target message_id, state), ascending."""
        ...

    async def floors(self, tenant: int, conversation_ids: Sequence[bytes]) -> list[int]:
        """The hot floor of each conversation (0: nothing trimmed)."""
        ...

    async def lease(self, name: str, token: str, ttl_ms: int) -> bool:
        """Take or renew the lease `name` for `token`; False while another holds it."""
        ...


@dataclass
class HotPage:
    """Hot rows of a history page: the floor they were read at, the records (at most
    `limit`), how many index rows were found (limit + 1 means more follow) and the
    recalls/deletes of trimmed messages the archive may not hold yet (message_id ->
    state)."""

    floor: int
    records: list[message_pb2.MessageRecord] = field(default_factory=list)
    found: int = 0
    pending: dict[bytes, int] = field(default_factory=dict)


@dataclass
class HotTail:
    """A session tail above the floor: the newest hot record (None: none above the floor),
    every hot record with seq > max(base, floor) (at most window + 1) and the pending
    states of trimmed messages (as in HotPage)."""

    floor: int
    head: Optional[message_pb2.MessageRecord]
    window: list[message_pb2.MessageRecord]
    pending: dict[bytes, int] = field(default_factory=dict)


class HotHistory(Protocol):
    """Reads of the hot tier that are consistent with the hot floor: each returns the
    floor it read at, and no row at or below it (a trim between two round trips is
    detected and the read repeated)."""

    async def page(self, tenant: int, conversation_id: bytes, intervals: Sequence[Interval], anchor: int,
                   direction: int, limit: int) -> HotPage:
        """Hot rows of a history page (see MessageStore.history_page for the arguments)."""
        ...

    async def floor(self, tenant: int, conversation_id: bytes) -> tuple[int, dict[bytes, int]]:
        """The conversation's hot floor and pending states (as in HotPage), one round trip."""
        ...

    async def latest(self, tenant: int, conversation_id: bytes, intervals: Sequence[Interval]) -> tuple[int, Optional[int]]:
        """(floor, seq of the newest visible hot message or None)."""
        ...

    async def tails(self, tenant: int, queries: Sequence[TailQuery], window: int) -> list[HotTail]:
        """Hot tails of a session page."""
        ...

    async def get(self, tenant: int, conversation_id: bytes, message_id: bytes) -> Optional[VersionedRecord]:
        """The record in Redis (None when trimmed or absent)."""
        ...

    async def resolve(self, tenant: int, records: Sequence[MessageRef], states: Sequence[MessageRef]
                      ) -> tuple[list[Optional[message_pb2.MessageRecord]], list[int], list[int], list[bool]]:
        """Redis records of `records` (None when absent), the state key of each of
        `records`, the state key of each of `states`, and whether each of `states` still
        has its record in Redis. One round trip."""
        ...

    async def states(self, tenant: int, refs: Sequence[MessageRef]) -> list[int]:
        """The Redis state key of each message (NORMAL when none)."""
        ...

    async def record_sizes(self, tenant: int, refs: Sequence[MessageRef]) -> list[int]:
        """Stored size of each record in Redis (0 when absent)."""
        ...
