from qim.proto.v1 import common_pb2 as _common_pb2
from qim.proto.v1 import message_pb2 as _message_pb2
from qim.proto.v1 import reaction_pb2 as _reaction_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MailboxEntry(_message.Message):
    __slots__ = ("mailbox_seq", "event_type", "event_id", "message_id", "conversation_id", "conversation_seq", "sender_id", "created_at_ms", "message_type", "custom_type", "client_message_id", "body", "state", "reply", "mention_user_ids", "mention_all", "version", "edited_at_ms", "reactions")
    MAILBOX_SEQ_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    SENDER_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_TYPE_FIELD_NUMBER: _ClassVar[int]
    CLIENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    MENTION_USER_IDS_FIELD_NUMBER: _ClassVar[int]
    MENTION_ALL_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    EDITED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    REACTIONS_FIELD_NUMBER: _ClassVar[int]
    mailbox_seq: int
    event_type: int
    event_id: bytes
    message_id: bytes
    conversation_id: bytes
    conversation_seq: int
    sender_id: int
    created_at_ms: int
    message_type: _common_pb2.MessageType
    custom_type: bytes
    client_message_id: bytes
    body: bytes
    state: _message_pb2.MessageState
    reply: _message_pb2.ReplyRef
    mention_user_ids: _containers.RepeatedScalarFieldContainer[int]
    mention_all: bool
    version: int
    edited_at_ms: int
    reactions: _reaction_pb2.MessageReactionSummary
    def __init__(self, mailbox_seq: _Optional[int] = ..., event_type: _Optional[int] = ..., event_id: _Optional[bytes] = ..., message_id: _Optional[bytes] = ..., conversation_id: _Optional[bytes] = ..., conversation_seq: _Optional[int] = ..., sender_id: _Optional[int] = ..., created_at_ms: _Optional[int] = ..., message_type: _Optional[_Union[_common_pb2.MessageType, str, int]] = ..., custom_type: _Optional[bytes] = ..., client_message_id: _Optional[bytes] = ..., body: _Optional[bytes] = ..., state: _Optional[_Union[_message_pb2.MessageState, str, int]] = ..., reply: _Optional[_Union[_message_pb2.ReplyRef, _Mapping]] = ..., mention_user_ids: _Optional[_Iterable[int]] = ..., mention_all: _Optional[bool] = ..., version: _Optional[int] = ..., edited_at_ms: _Optional[int] = ..., reactions: _Optional[_Union[_reaction_pb2.MessageReactionSummary, _Mapping]] = ...) -> None: ...

class PullMailbox(_message.Message):
    __slots__ = ("cursor", "max_entries", "max_bytes")
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    cursor: int
    max_entries: int
    max_bytes: int
    def __init__(self, cursor: _Optional[int] = ..., max_entries: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class MailboxBatch(_message.Message):
    __slots__ = ("entries", "next_cursor", "has_more", "lane", "shard_epoch")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    LANE_FIELD_NUMBER: _ClassVar[int]
    SHARD_EPOCH_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[MailboxEntry]
    next_cursor: int
    has_more: bool
    lane: int
    shard_epoch: int
    def __init__(self, entries: _Optional[_Iterable[_Union[MailboxEntry, _Mapping]]] = ..., next_cursor: _Optional[int] = ..., has_more: _Optional[bool] = ..., lane: _Optional[int] = ..., shard_epoch: _Optional[int] = ...) -> None: ...

class PushEvents(_message.Message):
    __slots__ = ("entries", "lane", "mailbox_seq", "message_ids", "prev_mailbox_seq", "inline_entries")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    LANE_FIELD_NUMBER: _ClassVar[int]
    MAILBOX_SEQ_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    PREV_MAILBOX_SEQ_FIELD_NUMBER: _ClassVar[int]
    INLINE_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[MailboxEntry]
    lane: int
    mailbox_seq: int
    message_ids: _containers.RepeatedScalarFieldContainer[bytes]
    prev_mailbox_seq: int
    inline_entries: _containers.RepeatedCompositeFieldContainer[MailboxEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[MailboxEntry, _Mapping]]] = ..., lane: _Optional[int] = ..., mailbox_seq: _Optional[int] = ..., message_ids: _Optional[_Iterable[bytes]] = ..., prev_mailbox_seq: _Optional[int] = ..., inline_entries: _Optional[_Iterable[_Union[MailboxEntry, _Mapping]]] = ...) -> None: ...
