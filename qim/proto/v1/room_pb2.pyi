from qim.proto.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RoomPosition(_message.Message):
    __slots__ = ("room_epoch", "room_seq")
    ROOM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ROOM_SEQ_FIELD_NUMBER: _ClassVar[int]
    room_epoch: int
    room_seq: int
    def __init__(self, room_epoch: _Optional[int] = ..., room_seq: _Optional[int] = ...) -> None: ...

class RoomEvent(_message.Message):
    __slots__ = ("room_seq", "kind", "sender_id", "client_message_id", "message_type", "custom_type", "body", "created_at_ms", "recalled_seq", "recalled", "sender_name")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[RoomEvent.Kind]
        POST: _ClassVar[RoomEvent.Kind]
        RECALL: _ClassVar[RoomEvent.Kind]
        JOINED: _ClassVar[RoomEvent.Kind]
        LEFT: _ClassVar[RoomEvent.Kind]
    KIND_UNSPECIFIED: RoomEvent.Kind
    POST: RoomEvent.Kind
    RECALL: RoomEvent.Kind
    JOINED: RoomEvent.Kind
    LEFT: RoomEvent.Kind
    ROOM_SEQ_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SENDER_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_TYPE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    RECALLED_SEQ_FIELD_NUMBER: _ClassVar[int]
    RECALLED_FIELD_NUMBER: _ClassVar[int]
    SENDER_NAME_FIELD_NUMBER: _ClassVar[int]
    room_seq: int
    kind: RoomEvent.Kind
    sender_id: int
    client_message_id: bytes
    message_type: _common_pb2.MessageType
    custom_type: bytes
    body: bytes
    created_at_ms: int
    recalled_seq: int
    recalled: bool
    sender_name: str
    def __init__(self, room_seq: _Optional[int] = ..., kind: _Optional[_Union[RoomEvent.Kind, str, int]] = ..., sender_id: _Optional[int] = ..., client_message_id: _Optional[bytes] = ..., message_type: _Optional[_Union[_common_pb2.MessageType, str, int]] = ..., custom_type: _Optional[bytes] = ..., body: _Optional[bytes] = ..., created_at_ms: _Optional[int] = ..., recalled_seq: _Optional[int] = ..., recalled: _Optional[bool] = ..., sender_name: _Optional[str] = ...) -> None: ...

class JoinRoom(_message.Message):
    __slots__ = ("room_id", "since", "recent")
    ROOM_ID_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    RECENT_FIELD_NUMBER: _ClassVar[int]
    room_id: int
    since: RoomPosition
    recent: int
    def __init__(self, room_id: _Optional[int] = ..., since: _Optional[_Union[RoomPosition, _Mapping]] = ..., recent: _Optional[int] = ...) -> None: ...

class RoomJoined(_message.Message):
    __slots__ = ("events", "room_id", "room_epoch", "room_seq", "recovered", "truncated", "first_seq", "member_count")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    ROOM_ID_FIELD_NUMBER: _ClassVar[int]
    ROOM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ROOM_SEQ_FIELD_NUMBER: _ClassVar[int]
    RECOVERED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEQ_FIELD_NUMBER: _ClassVar[int]
    MEMBER_COUNT_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[RoomEvent]
    room_id: int
    room_epoch: int
    room_seq: int
    recovered: bool
    truncated: bool
    first_seq: int
    member_count: int
    def __init__(self, events: _Optional[_Iterable[_Union[RoomEvent, _Mapping]]] = ..., room_id: _Optional[int] = ..., room_epoch: _Optional[int] = ..., room_seq: _Optional[int] = ..., recovered: _Optional[bool] = ..., truncated: _Optional[bool] = ..., first_seq: _Optional[int] = ..., member_count: _Optional[int] = ...) -> None: ...

class RoomSend(_message.Message):
    __slots__ = ("room_id", "client_message_id", "message_type", "custom_type", "body", "recall")
    ROOM_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_TYPE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    RECALL_FIELD_NUMBER: _ClassVar[int]
    room_id: int
    client_message_id: bytes
    message_type: _common_pb2.MessageType
    custom_type: bytes
    body: bytes
    recall: RoomPosition
    def __init__(self, room_id: _Optional[int] = ..., client_message_id: _Optional[bytes] = ..., message_type: _Optional[_Union[_common_pb2.MessageType, str, int]] = ..., custom_type: _Optional[bytes] = ..., body: _Optional[bytes] = ..., recall: _Optional[_Union[RoomPosition, _Mapping]] = ...) -> None: ...

class RoomAck(_message.Message):
    __slots__ = ("room_id", "client_message_id", "room_epoch", "room_seq", "created_at_ms", "replaced", "body")
    ROOM_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    ROOM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ROOM_SEQ_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    REPLACED_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    room_id: int
    client_message_id: bytes
    room_epoch: int
    room_seq: int
    created_at_ms: int
    replaced: bool
    body: bytes
    def __init__(self, room_id: _Optional[int] = ..., client_message_id: _Optional[bytes] = ..., room_epoch: _Optional[int] = ..., room_seq: _Optional[int] = ..., created_at_ms: _Optional[int] = ..., replaced: _Optional[bool] = ..., body: _Optional[bytes] = ...) -> None: ...

class RoomEvents(_message.Message):
    __slots__ = ("events", "room_id", "room_epoch", "member_count", "rejoin")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    ROOM_ID_FIELD_NUMBER: _ClassVar[int]
    ROOM_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MEMBER_COUNT_FIELD_NUMBER: _ClassVar[int]
    REJOIN_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[RoomEvent]
    room_id: int
    room_epoch: int
    member_count: int
    rejoin: bool
    def __init__(self, events: _Optional[_Iterable[_Union[RoomEvent, _Mapping]]] = ..., room_id: _Optional[int] = ..., room_epoch: _Optional[int] = ..., member_count: _Optional[int] = ..., rejoin: _Optional[bool] = ...) -> None: ...

class LeaveRoom(_message.Message):
    __slots__ = ("room_id",)
    ROOM_ID_FIELD_NUMBER: _ClassVar[int]
    room_id: int
    def __init__(self, room_id: _Optional[int] = ...) -> None: ...

class RoomLeft(_message.Message):
    __slots__ = ("room_id", "member_count")
    ROOM_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_COUNT_FIELD_NUMBER: _ClassVar[int]
    room_id: int
    member_count: int
    def __init__(self, room_id: _Optional[int] = ..., member_count: _Optional[int] = ...) -> None: ...
