"""Events the ClientRuntime hands to its host, and the SDK's typed errors (docs/design.md §9).

Ordering rule: for one applied batch, ConversationsUpdated comes before MessagesAdded
(then MessagesUpdated, MessagesRemoved), all only after the SQLite transaction
committed (seed 004 §7). MessagesAdded holds each conversation in conversation_seq
order with whole bodies; nothing is told from a PUSH_EVENTS frame but through the page an
inline push stands for (the same events as the pull's: docs/decisions/0156).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional

from qim.errors import ErrorCode, QimError, RequestError
from qim.sdk.model import Conversation, Membership, PendingSend, StoredMessage


@dataclass(frozen=True)
class SendAck:
    """Outcome of one send. `reconciled` is True when the commit was learnt from our own
    mailbox entry after a reconnect instead of a SEND_ACK frame. `replaced` True: the
    server's moderation committed `body` instead of the sent body (masked words; the
    stored row now has it; docs/decisions/0126); `body` is None otherwise."""

    client_message_id: bytes
    message_id: bytes
    conversation_id: bytes
    conversation_seq: int
    created_at_ms: int
    reconciled: bool = False
    replaced: bool = False
    body: Optional[bytes] = None


@dataclass(frozen=True)
class Recalled:
    """Outcome of `Client.recall`: the message (16 raw bytes) now has `state` (1 RECALLED)
    and the CONTROL message announcing it to the conversation has
    `control_conversation_seq`."""

    message_id: bytes
    state: int
    control_conversation_seq: int


@dataclass(frozen=True)
class Edited:
    """Outcome of `Client.edit` (docs/decisions/0120): the message (16 raw bytes) has body
    version `version`, announced by the CONTROL message at `control_conversation_seq`
    (unix ms `edited_at_ms`). `replaced` True: moderation committed `body` as this
    version instead of the body given (decision 0126); `body` is None otherwise."""

    message_id: bytes
    version: int
    control_conversation_seq: int
    edited_at_ms: int
    replaced: bool = False
    body: Optional[bytes] = None


@dataclass(frozen=True)
class Connected:
    """A connection authenticated: who this device is and its mailbox lane."""
    user_id: int
    device_id: int
    mailbox_lane: int


@dataclass(frozen=True)
class Disconnected:
    """The connection dropped; `reason` says why."""
    reason: str


@dataclass(frozen=True)
class KickedEvent:
    """The server closed the connection for good (a newer login of this device, or shutdown).
    KICKED{TOKEN_EXPIRED} is no such event: the runtime reconnects with a fresh token."""
    reason: int  # Kicked.Reason: 1 REPLACED, 2 SERVER_SHUTDOWN, 4 REVOKED, 5 BANNED
    message: str = ""  # BANNED: the operator's reason
    until_ms: int = 0  # BANNED: the ban's end (unix ms; 0 = until unbanned)


@dataclass(frozen=True)
class ConnectionState:
    """The runtime's state changed: "connecting", "syncing", "ready", "reconnecting",
    "offline" (closed by the host or a failed connect), "kicked"; `reason` says why."""

    state: str
    reason: str = ""


@dataclass(frozen=True)
class ConversationsUpdated:
    """List entries changed; `conversations` holds their values after the change
    (unread already counts the messages of the same batch: an app replaces its entry,
    never adds the MessagesAdded that follow)."""

    conversation_ids: tuple[bytes, ...]
    conversations: tuple[Conversation, ...] = ()


@dataclass(frozen=True)
class ReadPositionChanged:
    """The user's read position of a conversation moved (absolute, forward only).
    `source`: "local" (this device's MARK_READ or send), "sync" (READ_SYNC from another
    device of the user) or "server" (session list / SESSION_DELTA)."""

    conversation_id: bytes
    read_conversation_seq: int
    source: str


@dataclass(frozen=True)
class ConversationStateChanged:
    """The user's own choices or marks of a conversation changed (qim/sdk/convstate.py
    ConversationState: pinned, muted_until, hidden, mentioned, peer_read_seq). `source`:
    "local" (this device's call), "sync" (another device of the user) or "server"
    (session list / SESSION_DELTA)."""

    state: Any
    source: str


@dataclass(frozen=True)
class PeerRead:
    """A read tick: the peer of a direct conversation read up to `read_conversation_seq`
    (READ_RECEIPT; only while both users have receipts on)."""

    conversation_id: bytes
    reader_user_id: int
    read_conversation_seq: int


@dataclass(frozen=True)
class BadgeChanged:
    """The user's badge (total unread, UserBadgeState; docs/decisions/0129) changed:
    told once per newer `version` (only grows), never for a late, older frame."""

    badge: int
    version: int


@dataclass(frozen=True)
class MembershipChanged:
    """A membership CONTROL message of a group reached this device (create, join,
    leave, remove): `change.users` are the users it concerns."""

    change: Membership


@dataclass(frozen=True)
class SendPending:
    """A send was stored as pending (the app can show it as "sending" at once)."""

    pending: PendingSend


@dataclass(frozen=True)
class MessagesAdded:
    """Messages newly stored for the app, whole bodies, per conversation in conversation_seq order."""
    messages: tuple[StoredMessage, ...]


@dataclass(frozen=True)
class MessagesUpdated:
    """Stored messages whose state or body changed (recalled, deleted: `state` set and
    body empty; or a body repaired from a full copy). Told after the commit."""

    messages: tuple[StoredMessage, ...]


@dataclass(frozen=True)
class MessagesRemoved:
    """Messages no longer shown (REBUILD found them outside every member interval)."""

    message_ids: tuple[bytes, ...]


@dataclass(frozen=True)
class PendingResolved:
    """Sends the server acknowledged (SEND_ACK or found again while reconciling)."""
    acks: tuple[SendAck, ...]


@dataclass(frozen=True)
class SendFailed:
    """A send the server refused for good (e.g. CONFLICT): the pending row is `failed`
    and keeps its body; `code` is the wire ErrorCode. The waiter, if any, gets ServerError."""

    client_message_id: bytes
    code: ErrorCode
    message: str


@dataclass(frozen=True)
class SyncFailed:
    """A background mailbox sync (woken by a push) failed after its retries; the next
    push, pull_mailbox() or reconnect tries again. `code` is the ErrorCode."""

    code: ErrorCode
    message: str


@dataclass(frozen=True)
class CursorReset:
    """CURSOR_EXPIRED: REBUILD ran (history agrees with the store) and the cursor
    restarted from 0."""


Event = (Connected | Disconnected | KickedEvent | ConnectionState | ConversationsUpdated | MessagesAdded
         | MessagesUpdated | MessagesRemoved | PendingResolved | SendPending | SendFailed | SyncFailed | CursorReset
         | ReadPositionChanged | MembershipChanged | ConversationStateChanged | PeerRead | BadgeChanged)


class ServerError(RequestError):
    """The server answered a request with ERROR; `code` is the wire ErrorCode,
    `retry_after_ms` the server's hint for a retry (RATE_LIMITED; 0 = none)."""

    def __init__(self, code: ErrorCode, message: str, request_opcode: int = 0, retry_after_ms: int = 0) -> None:
        super().__init__(code, message)
        self.request_opcode = request_opcode
        self.retry_after_ms = retry_after_ms


class PolicyRefused(ServerError):
    """The deployment's send policy refused the send (ERROR POLICY_REFUSED,
    docs/decisions/0099): for good, never retried; `message` is the policy's reason, safe
    to show. The pending row is `failed` and keeps its body (the app may offer it for
    editing)."""


class Banned(ServerError):
    """An operator banned this user (`qimctl moderation ban`; docs/decisions/0123,
    Amendment 2): the gateway refused the login (ERROR BANNED) or closed the connection
    (KICKED{BANNED}). The runtime stops for it (ConnectionState "kicked" or "offline"
    with this message) and does not reconnect; pending sends stay pending. `reason` is
    the operator's reason, `until_ms` the ban's end (unix ms; 0 = until unbanned);
    `message`: "banned until 2026-12-31 00:00 UTC: <reason>"."""

    def __init__(self, reason: str, until_ms: int, message: str = "") -> None:
        super().__init__(ErrorCode.BANNED, message or ban_message(reason, until_ms))
        self.reason, self.until_ms = reason, until_ms


def ban_message(reason: str, until_ms: int) -> str:
    """What a banned user is told (the gateway's words, qim/stores/bans.py)."""
    if not until_ms:
        return f"banned by a moderator: {reason}"
    end = datetime.fromtimestamp(until_ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"banned until {end}: {reason}"


class SendRefused(RequestError):
    """The SDK refused a send before storing anything: the server would refuse it too
    (`code` PAYLOAD_TOO_LARGE or INVALID_ARGUMENT; docs/design.md §4 validation)."""


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
