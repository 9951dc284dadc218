"""Events the ClientRuntime hands to its host, and the SDK's typed errors (DESIGN.md §9).

Ordering rule: for one applied batch, ConversationsUpdated comes before MessagesAdded,
and both only after the SQLite transaction committed (seed 004 §7).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from qim.errors import ErrorCode, QimError, RequestError
from qim.sdk.model import StoredMessage


@dataclass(frozen=True)
class SendAck:
    """Outcome of one send. `reconciled` is True when the commit was learnt from our own
    mailbox entry after a reconnect instead of a SEND_ACK frame."""

    client_message_id: bytes
    message_id: bytes
    conversation_id: bytes
    conversation_seq: int
    created_at_ms: int
    reconciled: bool = False


@dataclass(frozen=True)
class Connected:
    user_id: int
    device_id: int
    mailbox_lane: int


@dataclass(frozen=True)
class Disconnected:
    reason: str


@dataclass(frozen=True)
class KickedEvent:
    reason: int  # Kicked.Reason: 1 REPLACED, 2 SERVER_SHUTDOWN


@dataclass(frozen=True)
class ConversationsUpdated:
    conversation_ids: tuple[bytes, ...]


@dataclass(frozen=True)
class MessagesAdded:
    messages: tuple[StoredMessage, ...]


@dataclass(frozen=True)
class PendingResolved:
    acks: tuple[SendAck, ...]


@dataclass(frozen=True)
class CursorReset:
    """CURSOR_EXPIRED: the cursor restarted from 0 (history back-fill: PULL_HISTORY, issue 6)."""


Event = Connected | Disconnected | KickedEvent | ConversationsUpdated | MessagesAdded | PendingResolved | CursorReset


class ServerError(RequestError):
    """The server answered a request with ERROR; `code` is the wire ErrorCode."""

    def __init__(self, code: ErrorCode, message: str, request_opcode: int = 0) -> None:
        super().__init__(code, message)
        self.request_opcode = request_opcode


class ConnectionLost(QimError):
    """The connection dropped or a PING probe went unanswered; the request may or may
    not have been applied (sends are retried with the same client_message_id)."""

    code = ErrorCode.UNAVAILABLE


class NotConnected(QimError):
    """No authenticated connection (call `connect()` first)."""

    code = ErrorCode.UNAVAILABLE


class Kicked(QimError):
    """The server sent KICKED; the runtime does not reconnect on its own."""

    code = ErrorCode.UNAUTHENTICATED

    def __init__(self, reason: int) -> None:
        super().__init__(f"kicked (reason {reason})")
        self.reason = reason


class SendTimeout(QimError):
    """No ACK within the caller's timeout; the pending row stays and is resent later."""

    code = ErrorCode.UNAVAILABLE

    def __init__(self, client_message_id: bytes) -> None:
        super().__init__("send not acknowledged in time")
        self.client_message_id: Optional[bytes] = client_message_id
