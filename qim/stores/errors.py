"""Typed errors of the storage layer (docs/decisions/0019-storage-layer.md).

Every store backend raises only these (and qim.errors.MailboxDirty): the Redis backend
maps redis-py exceptions and `QIM_<REASON>` script replies to them through ONE table at
its boundary (qim/stores/redis/errors.py), the CQL backend will map its driver's errors
to the same classes. Services catch these, never a driver's exception.

Each class is a RequestError with the wire code it maps to when nobody handles it, so a
store error that reaches an RPC handler becomes an ERROR frame with the right code
(never a silent INTERNAL); messages are safe to show (no keys, ids or bodies).
StoreUnavailable is also an EngineError: loops that retry engine outages (mailbox
shards, the durable session projection, CommitRecovery) retry it.
"""

from __future__ import annotations

from typing import Iterable, Optional

from qim.errors import EngineError, ErrorCode, RequestError


class StorageError(RequestError):
    """Root of the storage errors; `code` is the class's wire code, `reason` the
    backend's name for a refusal when it has one."""

    code = ErrorCode.INTERNAL
    reason = ""  # the backend's own name for the refusal (e.g. a QIM_<REASON> script reply)

    def __init__(self, message: str) -> None:
        super().__init__(type(self).code, message)


class StoreUnavailable(StorageError, EngineError):
    """The backend cannot be reached or refuses work for now (connection refused or lost,
    timeout, Redis LOADING, out of memory): retry later. Nothing was lost."""

    code = ErrorCode.UNAVAILABLE


class StoreCorrupt(StorageError):
    """Stored data is missing where it must exist or does not decode (a record behind a
    history index entry, a member interval, a snapshot, a checkpoint field)."""

    code = ErrorCode.INTERNAL


class Conflict(StorageError):
    """The write conflicts with what is stored: a client_message_id reused with other
    content, a group that already exists (docs/design.md §5.2, §7)."""

    code = ErrorCode.CONFLICT


class Forbidden(StorageError):
    """The actor may not do this (not a current member of the group)."""

    code = ErrorCode.FORBIDDEN


class NotFound(StorageError):
    """The addressed entity does not exist (a group, a commit state that vanished)."""

    code = ErrorCode.NOT_FOUND


class MembershipMoved(StorageError):
    """The group's membership_version moved between the caller's read and its write: plan
    again from fresh reads (bounded by the caller)."""

    code = ErrorCode.UNAVAILABLE


class RecordChanged(StorageError):
    """The target record changed between the caller's read and its conditional write
    (recall/delete): read again (bounded by the caller)."""

    code = ErrorCode.UNAVAILABLE


class ClockBehind(StorageError):
    """A reservation's message_id is below the conversation's newest one: `message_id`
    (16 bytes) is that newest id; the writer's HLC observes it and issues a newer id
    (docs/decisions/0017)."""

    code = ErrorCode.UNAVAILABLE

    def __init__(self, message: str, message_id: bytes = b"") -> None:
        super().__init__(message)
        self.message_id = message_id


class Revoked(StorageError):
    """The sender's token was issued at or before its device's (or user's) revocation
    cutoff (docs/decisions/0080-revocation-checked-at-commit.md): the send is refused in
    the same atomic call that would reserve it."""

    code = ErrorCode.UNAUTHENTICATED


class Muted(StorageError):
    """The sender is muted in this group by an operator (`qimctl moderation mute`,
    docs/decisions/0127-group-mute.md): a send, an edit or a reaction there is refused,
    POLICY_REFUSED with the mute's message (its end and the operator's reason)."""

    code = ErrorCode.POLICY_REFUSED


class PreviousNotSequenced(StorageError):
    """SendMessage.previous_client_message_id names a send that holds no commit state yet:
    the client retries with the same cmid (docs/decisions/0017)."""

    code = ErrorCode.UNAVAILABLE


class NotRecorded(StorageError):
    """A commit is still RESERVED (split mode) where RECORDED was required."""

    code = ErrorCode.UNAVAILABLE


class LeaseLost(StorageError):
    """Another process holds the lease (writer_id, HLC window): stop issuing ids."""

    code = ErrorCode.UNAVAILABLE


class CheckpointConflict(StorageError):
    """A compare-and-set of a consumer checkpoint found other values (another owner, or
    a rebinding under us): fail closed unless the stored values prove our own write."""

    code = ErrorCode.UNAVAILABLE


class NotOwner(StorageError):
    """A shard owner's write carried a stale owner_epoch: a newer owner fenced the shard
    (docs/decisions/0040-scale-leases-and-fencing.md). The writer must stop serving that
    shard at once; nothing was written. `shard`: the refused shard when a call covered
    several (None when the caller knows it)."""

    code = ErrorCode.UNAVAILABLE
    shard: Optional[int] = None


class ShardsUnavailable(StoreUnavailable):
    """A call covering several shards that live on several instances wrote only some of
    them: `shards` (sorted shard numbers) were NOT written because their instance, or an
    instance holding a registration they need, was unavailable; every other shard of the
    call was written (docs/decisions/0097, Amendment). Retry only `shards`, later: the
    others must not wait for their instance to come back."""

    def __init__(self, message: str, shards: Iterable[int]) -> None:
        super().__init__(message)
        self.shards = sorted(shards)
