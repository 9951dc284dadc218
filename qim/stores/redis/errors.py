"""The one error table of the Redis backend (docs/decisions/0019; in the style of redis-py's
`_parsers/base.py EXCEPTION_CLASSES`): redis-py exceptions and `QIM_<REASON>` replies of
our Lua scripts become typed store errors HERE, once. No store module catches a redis
exception anywhere else; services never see one.

Script refusals are raised in Lua as `error({err = "QIM_<REASON> <detail>"})` or
`redis.error_reply("QIM_<REASON> <detail>")`; Redis may append " script: ..." to the
text. `<detail>` becomes the error message (safe to show: scripts never put keys or
bodies in it); QIM_CLOCK_BEHIND's detail is the conversation's newest message_id in hex.
"""

from __future__ import annotations

from redis import exceptions as rx

from qim.errors import MailboxDirty, QimError
from qim.stores.errors import (
    CheckpointConflict,
    ClockBehind,
    Conflict,
    Forbidden,
    LeaseLost,
    MembershipMoved,
    Muted,
    NotFound,
    NotOwner,
    NotRecorded,
    PreviousNotSequenced,
    RecordChanged,
    Revoked,
    StorageError,
    StoreCorrupt,
    StoreUnavailable,
)

# redis-py exception class -> store error, first match wins (subclasses first).
EXCEPTION_CLASSES: tuple[tuple[type[Exception], type[StorageError]], ...] = (
    (rx.BusyLoadingError, StoreUnavailable),  # LOADING: replaying the AOF after a restart
    (rx.ConnectionError, StoreUnavailable),  # refused, reset, pool exhausted past its wait
    (rx.TimeoutError, StoreUnavailable),
    (rx.ReadOnlyError, StoreUnavailable),  # a replica, or a primary being failed over
    (rx.OutOfMemoryError, StoreUnavailable),  # noeviction refusing writes: nothing lost
    (rx.NoScriptError, StoreUnavailable),  # script cache flushed between load and call
    (rx.RedisError, StoreUnavailable),  # anything else the client or server refused
)

# QIM_<REASON> of a script reply -> error class (wire codes in qim/stores/errors.py).
SCRIPT_REPLIES: dict[str, type[QimError]] = {
    "QIM_CONFLICT": Conflict,  # cmid reused with other content; group exists
    "QIM_FORBIDDEN": Forbidden,  # not a current member
    "QIM_NOT_FOUND": NotFound,  # no such group; commit state vanished
    "QIM_PREVIOUS_PENDING": PreviousNotSequenced,
    "QIM_REVOKED": Revoked,  # the sender's token is revoked (docs/decisions/0080)
    "QIM_MUTED": Muted,  # the sender is muted in the group (docs/decisions/0127)
    "QIM_MEMBERSHIP_CHANGED": MembershipMoved,
    "QIM_RECORD_CHANGED": RecordChanged,
    "QIM_CLOCK_BEHIND": ClockBehind,
    "QIM_NOT_RECORDED": NotRecorded,
    "QIM_HLC_LOST": LeaseLost,
    "QIM_DIGEST_CONFLICT": MailboxDirty,  # dispatch_id seen with another payload
    "QIM_WM_CONFLICT": MailboxDirty,  # watermark moved under us: two owners
    "QIM_CKPT_CONFLICT": CheckpointConflict,
    "QIM_CKPT_BINDING": CheckpointConflict,
    "QIM_CKPT_CORRUPT": StoreCorrupt,
    "QIM_NOT_OWNER": NotOwner,  # a stale owner_epoch: a newer owner fenced the shard
}


def script_reply(text: str) -> tuple[str, str]:
    """(QIM_<REASON>, detail) of a script's error text; ("", "") when it is not one."""
    at = text.find("QIM_")
    if at < 0:
        return "", ""
    reply = text[at:].split(" script:")[0].strip()
    reason, _, detail = reply.partition(" ")
    return reason, detail.strip()


def translate(exc: BaseException, operation: str) -> QimError:
    """The typed error for a redis-py exception raised by `operation` (a short name such
    as "commit reserve", shown in messages). Unknown QIM_ reasons are StoreCorrupt (a
    script and its caller disagree); a reply without QIM_ falls to the class table."""
    if isinstance(exc, rx.ResponseError) and not isinstance(exc, (rx.NoScriptError, rx.ReadOnlyError,
                                                                  rx.OutOfMemoryError)):
        reason, detail = script_reply(str(exc))
        if reason:
            cls = SCRIPT_REPLIES.get(reason)
            if cls is None:
                return StoreCorrupt(f"{operation}: unknown script refusal {reason}")
            if cls is ClockBehind:
                try:
                    newest = bytes.fromhex(detail)
                except ValueError:
                    return StoreCorrupt(f"{operation}: QIM_CLOCK_BEHIND without a message_id")
                behind = ClockBehind("message_id below the conversation's newest", newest)
                behind.reason = reason
                return behind
            if cls is MailboxDirty:  # the detail names no key or id (e.g. "at offset 12"): safe to show
                return MailboxDirty(f"{reason} {detail}".strip())
            err = cls(detail or reason)
            if isinstance(err, StorageError):
                err.reason = reason
            if isinstance(err, NotOwner) and detail.startswith("shard="):  # which shard of a multi-shard call
                err.shard = int(detail.split(" ", 1)[0][len("shard="):])
            return err
    for klass, mapped in EXCEPTION_CLASSES:
        if isinstance(exc, klass):
            return mapped(f"{operation}: redis {exc.__class__.__name__}")
    return StoreUnavailable(f"{operation}: {exc.__class__.__name__}")
