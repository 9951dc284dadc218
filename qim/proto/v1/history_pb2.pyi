from qim.proto.v1 import common_pb2 as _common_pb2
from qim.proto.v1 import message_pb2 as _message_pb2
from qim.proto.v1 import reaction_pb2 as _reaction_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HistoryDirection(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OLDER: _ClassVar[HistoryDirection]
    NEWER: _ClassVar[HistoryDirection]
OLDER: HistoryDirection
NEWER: HistoryDirection

class PullHistory(_message.Message):
    __slots__ = ("conversation_id", "peer_user_id", "anchor_seq", "direction", "limit", "max_bytes")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    PEER_USER_ID_FIELD_NUMBER: _ClassVar[int]
    ANCHOR_SEQ_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    peer_user_id: int
    anchor_seq: int
    direction: HistoryDirection
    limit: int
    max_bytes: int
    def __init__(self, conversation_id: _Optional[bytes] = ..., peer_user_id: _Optional[int] = ..., anchor_seq: _Optional[int] = ..., direction: _Optional[_Union[HistoryDirection, str, int]] = ..., limit: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class HistoryItem(_message.Message):
    __slots__ = ("message_id", "conversation_seq", "sender_id", "created_at_ms", "message_type", "custom_type", "body", "body_included", "state", "client_message_id", "reply", "mention_user_ids", "mention_all", "version", "edited_at_ms", "reactions")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    SENDER_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_TYPE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    BODY_INCLUDED_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CLIENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    MENTION_USER_IDS_FIELD_NUMBER: _ClassVar[int]
    MENTION_ALL_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    EDITED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    REACTIONS_FIELD_NUMBER: _ClassVar[int]
    message_id: bytes
    conversation_seq: int
    sender_id: int
    created_at_ms: int
    message_type: _common_pb2.MessageType
    custom_type: bytes
    body: bytes
    body_included: bool
    state: _message_pb2.MessageState
    client_message_id: bytes
    reply: _message_pb2.ReplyRef
    mention_user_ids: _containers.RepeatedScalarFieldContainer[int]
    mention_all: bool
    version: int
    edited_at_ms: int
    reactions: _reaction_pb2.MessageReactionSummary
    def __init__(self, message_id: _Optional[bytes] = ..., conversation_seq: _Optional[int] = ..., sender_id: _Optional[int] = ..., created_at_ms: _Optional[int] = ..., message_type: _Optional[_Union[_common_pb2.MessageType, str, int]] = ..., custom_type: _Optional[bytes] = ..., body: _Optional[bytes] = ..., body_included: _Optional[bool] = ..., state: _Optional[_Union[_message_pb2.MessageState, str, int]] = ..., client_message_id: _Optional[bytes] = ..., reply: _Optional[_Union[_message_pb2.ReplyRef, _Mapping]] = ..., mention_user_ids: _Optional[_Iterable[int]] = ..., mention_all: _Optional[bool] = ..., version: _Optional[int] = ..., edited_at_ms: _Optional[int] = ..., reactions: _Optional[_Union[_reaction_pb2.MessageReactionSummary, _Mapping]] = ...) -> None: ...

class HistoryBatch(_message.Message):
    __slots__ = ("items", "has_more", "next_anchor")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    NEXT_ANCHOR_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[HistoryItem]
    has_more: bool
    next_anchor: int
    def __init__(self, items: _Optional[_Iterable[_Union[HistoryItem, _Mapping]]] = ..., has_more: _Optional[bool] = ..., next_anchor: _Optional[int] = ...) -> None: ...
