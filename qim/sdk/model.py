"""Plain data of the SDK's LocalStore (DESIGN.md §9): rows, apply results, endpoint form."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from qim.errors import ErrorCode, QimError


class StoreError(QimError):
    """LocalStore fault: identity mismatch, cursor regression, failed transaction."""

    code = ErrorCode.INTERNAL


@dataclass(frozen=True)
class StoredMessage:
    """One row of `messages` (ids as 16 raw bytes, times in unix ms)."""

    message_id: bytes
    conversation_id: bytes
    conversation_seq: int
    sender_id: int
    created_at_ms: int
    message_type: int
    custom_type: bytes
    body: bytes
    client_message_id: Optional[bytes]
    mailbox_seq: int  # 0: learnt from history (REBUILD), not from a mailbox
    state: int = 0  # MessageState: 0 NORMAL, 1 RECALLED, 2 DELETED (then body is empty)


@dataclass(frozen=True)
class PendingSend:
    """One row of `pending`: everything needed to resend with the same cmid."""

    client_message_id: bytes
    ordinal: int
    conversation_id: bytes
    recipient_user_id: int
    message_type: int
    custom_type: bytes
    body: bytes
    created_local_ms: int
    state: str


@dataclass(frozen=True)
class Resolved:
    """A pending send found committed: its cmid and the ACK coordinates."""

    client_message_id: bytes
    message_id: bytes
    conversation_id: bytes
    conversation_seq: int
    created_at_ms: int


@dataclass(frozen=True)
class ApplyResult:
    """What one apply committed: newly inserted messages (per conversation in
    conversation_seq order), resolved sends, messages whose state or body changed
    (recalled, deleted, repaired) and ids of messages no longer shown."""

    inserted: list[StoredMessage]
    resolved: list[Resolved]
    updated: list[StoredMessage] = field(default_factory=list)
    removed: list[bytes] = field(default_factory=list)


def canonical_endpoint(endpoint: str) -> str:
    """'Host:Port' -> 'host:port' (lowercase host, IPv6 in brackets); ValueError if no port."""
    host, sep, port = endpoint.strip().rpartition(":")
    host = host.strip("[]").lower()
    if not sep or not host or not port.isdigit():
        raise ValueError(f"bad endpoint {endpoint!r}: expected host:port")
    return f"[{host}]:{int(port)}" if ":" in host else f"{host}:{int(port)}"
