"""Retention classes of a conversation's history (docs/decisions/0023; docs/design.md §8 "default history
30 days (configurable 1..3650); ephemeral 24 h; compliance_hold never expires").

Pure logic shared by the HistoryArchiver (the TTL of every CQL row it writes) and the
trimmer (the hot window of a conversation never outlasts its retention, and a message
past its retention may leave Redis without a CQL row). Expiry is always computed from
the message's created_at, so a row written again (a replayed batch, a recall) keeps
the same expiry.

A conversation's class is set by `qimctl retention set` (stored in Redis by the archive
state store); a conversation without one is "default".
"""

from __future__ import annotations

from typing import Optional

from qim.consts import (
    DAY_MS,
    EPHEMERAL_RETENTION_MS,
    RETENTION_CLASSES,
    RETENTION_COMPLIANCE_HOLD,
    RETENTION_EPHEMERAL_24H,
)

# A CQL TTL cannot exceed 20 years (Cassandra's and ScyllaDB's MAX_TTL)
MAX_TTL_S = 20 * 365 * 86_400


def check_class(name: str) -> str:
    """`name` when it is a retention class; ValueError listing the classes otherwise."""
    if name not in RETENTION_CLASSES:
        raise ValueError(f"unknown retention class {name!r}: one of {', '.join(RETENTION_CLASSES)}")
    return name


def retention_ms(name: str, default_days: int) -> Optional[int]:
    """How long history of class `name` is kept, in ms; None = never expires."""
    if name == RETENTION_COMPLIANCE_HOLD:
        return None
    if name == RETENTION_EPHEMERAL_24H:
        return EPHEMERAL_RETENTION_MS
    check_class(name)
    return default_days * DAY_MS


def expired(created_at_ms: int, name: str, default_days: int, now_ms: int) -> bool:
    """Whether a message created at `created_at_ms` is past its retention at `now_ms`."""
    keep = retention_ms(name, default_days)
    return keep is not None and created_at_ms + keep <= now_ms


def ttl_seconds(created_at_ms: int, name: str, default_days: int, now_ms: int) -> Optional[int]:
    """The CQL TTL of a row written now for a message created at `created_at_ms`: 0 =
    no TTL (compliance hold), None = already expired (write nothing), else the seconds
    left, rounded up, at most MAX_TTL_S."""
    keep = retention_ms(name, default_days)
    if keep is None:
        return 0
    left_ms = created_at_ms + keep - now_ms
    if left_ms <= 0:
        return None
    return min(MAX_TTL_S, -(-left_ms // 1000))
