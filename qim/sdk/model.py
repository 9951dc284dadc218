"""Plain data of the SDK's LocalStore (docs/design.md §9): rows, apply results, endpoint form."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional
from urllib.parse import urlsplit

from qim._core.types import MessageCoord
from qim.errors import ErrorCode, QimError
from qim.proto.v1 import message_pb2


class StoreError(QimError):
    """LocalStore fault: identity mismatch, cursor regression, failed transaction.
    `stored_device`: the store's device id when it was opened for another one."""

    code = ErrorCode.INTERNAL
    stored_device: Optional[int] = None


@dataclass(frozen=True)
class StoredMessage:
    """One row of `messages` (ids as 16 raw bytes, times in unix ms).

    Its first seven fields are the message's coordinate, `MessageCoord`
    (qim/_core/types.py), in that type's order, kept flat because they are the row's
    column order and the attributes an app reads (docs/sdk.md "Messages and history"): build a row
    from a coordinate with `StoredMessage.at`, read it back with `.coord`
    (tests/sdk/test_store_states.py holds the two layouts together)."""

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
    # replies, mentions, edit mark (docs/decisions/0120): a MessageRecord holding only its
    # fields 13-17 as the server gave them; read them through the properties below
    extras: bytes = b""

    @property
    def _ext(self) -> message_pb2.MessageRecord:
        return message_pb2.MessageRecord.FromString(self.extras)

    @property
    def reply(self) -> Optional[message_pb2.ReplyRef]:
        """The replied message as the server quoted it (message_id, conversation_seq,
        sender_id, message_type, state, preview: the first 80 characters of a TEXT body;
        state RECALLED and no preview for a recalled one), None when no reply."""
        ext = self._ext
        return ext.reply if ext.HasField("reply") else None

    @property
    def mentions(self) -> tuple[int, ...]:
        """The user ids the message mentions."""
        return tuple(self._ext.mention_user_ids)

    @property
    def mention_all(self) -> bool:
        """Whether the message mentions everyone in the conversation."""
        return self._ext.mention_all

    @property
    def version(self) -> int:
        """0: never edited; n: `body` is the sender's n-th edit."""
        return self._ext.version

    @property
    def edited(self) -> bool:
        """Whether the body is an edited version (docs/sdk.md "Replies, mentions and edits")."""
        return self.state == 0 and self.version > 0

    @classmethod
    def at(cls, coord: MessageCoord, body: bytes, client_message_id: Optional[bytes], mailbox_seq: int,
           state: int = 0) -> "StoredMessage":
        """The row of the message at `coord` (`client_message_id` None unless it is our own)."""
        return cls(*coord, body, client_message_id, mailbox_seq, state)

    @property
    def coord(self) -> MessageCoord:
        """Where the message stands and what it is (the row's first seven fields)."""
        return MessageCoord(self.message_id, self.conversation_id, self.conversation_seq, self.sender_id,
                            self.created_at_ms, self.message_type, self.custom_type)


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
    extras: bytes = b""  # reply target and mentions: SendMessage fields 9-11 (qim/sdk/extras.py)


@dataclass(frozen=True)
class Resolved:
    """A pending send found committed: its cmid and the ACK coordinates; `body` the
    committed body when moderation replaced the sent one (SEND_ACK `replaced`), else None."""

    client_message_id: bytes
    message_id: bytes
    conversation_id: bytes
    conversation_seq: int
    created_at_ms: int
    body: Optional[bytes] = None


@dataclass(frozen=True)
class LastMessage:
    """The head of a conversation (its newest visible message of any type, docs/design.md §6)
    for a list preview. `body` may be cut (`body_complete` False): read the message
    itself for the whole body. A CONTROL head's body is a ControlEvent."""

    message_id: bytes
    conversation_seq: int
    sender_id: int
    created_at_ms: int
    message_type: int
    custom_type: bytes
    body: bytes
    body_complete: bool
    state: int  # MessageState: 0 NORMAL, 1 RECALLED, 2 DELETED


@dataclass(frozen=True)
class Conversation:
    """One entry of the device's conversation list (qim/sdk/conversations.py).

    `unread` follows the one definition of docs/design.md §6 (messages above the read
    position, not our own, not CONTROL, NORMAL); `unread_exact` is False when the
    window head − base exceeds 200 (then `unread` is 200) or while the store cannot
    tell the exact count yet. `read_conversation_seq` is the user's read position
    (shared by devices, forward only). Groups: `joined_at`/`left_at` of the latest
    member interval (`left_at` 0 while a member); `title` the group's title ("" none:
    show the group id; docs/sdk.md "Names"). Ids as 16 raw bytes."""

    conversation_id: bytes
    kind: int  # 1 direct, 2 group
    peer_user_id: int
    group_id: int
    read_conversation_seq: int
    unread: int
    unread_exact: bool
    last_conversation_seq: int
    last_activity_id: Optional[bytes]
    last_message: Optional[LastMessage]
    joined_at: int = 0
    left_at: int = 0
    title: str = ""

    @property
    def is_group(self) -> bool:
        """True for a group conversation (kind 2)."""
        return self.kind == 2

    @property
    def is_member(self) -> bool:
        """False once the user left (or was removed from) the group."""
        return self.left_at == 0


@dataclass(frozen=True)
class Membership:
    """A membership CONTROL message of a group as this device applied it."""

    conversation_id: bytes
    group_id: int
    conversation_seq: int
    kind: int  # MembershipChange.Kind: 1 CREATED, 2 JOINED, 3 LEFT, 4 REMOVED
    users: tuple[int, ...]
    actor_user_id: int  # 0: the operator (qimctl)


@dataclass(frozen=True)
class ApplyResult:
    """What one apply committed: newly inserted messages (per conversation in
    conversation_seq order), resolved sends, messages whose state or body changed
    (recalled, deleted, repaired), ids of messages no longer shown, and the conversation
    list entries it changed (their values after the commit), read positions it moved
    ((conversation_id, read_conversation_seq)) and membership changes it applied."""

    inserted: list[StoredMessage]
    resolved: list[Resolved]
    updated: list[StoredMessage] = field(default_factory=list)
    removed: list[bytes] = field(default_factory=list)
    conversations: list[Conversation] = field(default_factory=list)
    reads: list[tuple[bytes, int]] = field(default_factory=list)
    membership: list[Membership] = field(default_factory=list)


def canonical_endpoint(endpoint: str) -> str:
    """'Host:Port' -> 'host:port' (lowercase host, IPv6 in brackets); a WebSocket URI
    'WSS://Host:Port/path' -> 'wss://host:port/path' (the default port made explicit);
    ValueError if no port or not one of these forms."""
    if "://" in endpoint:
        parts = urlsplit(endpoint.strip())
        if parts.scheme.lower() not in ("ws", "wss") or not parts.hostname:
            raise ValueError(f"bad endpoint {endpoint!r}: expected host:port, ws:// or wss://")
        ws_port = parts.port or (443 if parts.scheme.lower() == "wss" else 80)
        return f"{parts.scheme.lower()}://{canonical_endpoint(f'[{parts.hostname}]:{ws_port}')}{parts.path or '/'}"
    host, sep, port = endpoint.strip().rpartition(":")
    host = host.strip("[]").lower()
    if not sep or not host or not port.isdigit():
        raise ValueError(f"bad endpoint {endpoint!r}: expected host:port")
    return f"[{host}]:{int(port)}" if ":" in host else f"{host}:{int(port)}"
