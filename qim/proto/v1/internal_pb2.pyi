from qim.proto.v1 import mailbox_pb2 as _mailbox_pb2
from qim.proto.v1 import message_pb2 as _message_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Actor(_message.Message):
    __slots__ = ("tenant_id", "user_id", "device_id", "display_name", "token_iat")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IAT_FIELD_NUMBER: _ClassVar[int]
    tenant_id: bytes
    user_id: int
    device_id: int
    display_name: str
    token_iat: int
    def __init__(self, tenant_id: _Optional[bytes] = ..., user_id: _Optional[int] = ..., device_id: _Optional[int] = ..., display_name: _Optional[str] = ..., token_iat: _Optional[int] = ...) -> None: ...

class WriterSend(_message.Message):
    __slots__ = ("actor", "upstream", "opcode", "traceparent")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_FIELD_NUMBER: _ClassVar[int]
    OPCODE_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    actor: Actor
    upstream: bytes
    opcode: int
    traceparent: str
    def __init__(self, actor: _Optional[_Union[Actor, _Mapping]] = ..., upstream: _Optional[bytes] = ..., opcode: _Optional[int] = ..., traceparent: _Optional[str] = ...) -> None: ...

class AdminRequest(_message.Message):
    __slots__ = ("tenant_id", "membership", "delete_message")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERSHIP_FIELD_NUMBER: _ClassVar[int]
    DELETE_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    tenant_id: bytes
    membership: MembershipEdit
    delete_message: DeleteMessage
    def __init__(self, tenant_id: _Optional[bytes] = ..., membership: _Optional[_Union[MembershipEdit, _Mapping]] = ..., delete_message: _Optional[_Union[DeleteMessage, _Mapping]] = ...) -> None: ...

class MembershipEdit(_message.Message):
    __slots__ = ("group_id", "add", "remove", "request_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    ADD_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: int
    add: _containers.RepeatedScalarFieldContainer[int]
    remove: _containers.RepeatedScalarFieldContainer[int]
    request_id: bytes
    def __init__(self, group_id: _Optional[int] = ..., add: _Optional[_Iterable[int]] = ..., remove: _Optional[_Iterable[int]] = ..., request_id: _Optional[bytes] = ...) -> None: ...

class DeleteMessage(_message.Message):
    __slots__ = ("conversation_id", "message_id", "request_id", "peer_user_id")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PEER_USER_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    message_id: bytes
    request_id: bytes
    peer_user_id: int
    def __init__(self, conversation_id: _Optional[bytes] = ..., message_id: _Optional[bytes] = ..., request_id: _Optional[bytes] = ..., peer_user_id: _Optional[int] = ...) -> None: ...

class SessionCall(_message.Message):
    __slots__ = ("actor", "opcode", "upstream")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    OPCODE_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_FIELD_NUMBER: _ClassVar[int]
    actor: Actor
    opcode: int
    upstream: bytes
    def __init__(self, actor: _Optional[_Union[Actor, _Mapping]] = ..., opcode: _Optional[int] = ..., upstream: _Optional[bytes] = ...) -> None: ...

class RoomCall(_message.Message):
    __slots__ = ("actor", "opcode", "upstream", "connection")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    OPCODE_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_FIELD_NUMBER: _ClassVar[int]
    CONNECTION_FIELD_NUMBER: _ClassVar[int]
    actor: Actor
    opcode: int
    upstream: bytes
    connection: int
    def __init__(self, actor: _Optional[_Union[Actor, _Mapping]] = ..., opcode: _Optional[int] = ..., upstream: _Optional[bytes] = ..., connection: _Optional[int] = ...) -> None: ...

class RoomPush(_message.Message):
    __slots__ = ("tenant_id", "room_id", "events")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    ROOM_ID_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    tenant_id: bytes
    room_id: int
    events: bytes
    def __init__(self, tenant_id: _Optional[bytes] = ..., room_id: _Optional[int] = ..., events: _Optional[bytes] = ...) -> None: ...

class DeviceFrames(_message.Message):
    __slots__ = ("tenant_id", "user_id", "exclude_device_id", "opcode", "body")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    OPCODE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    tenant_id: bytes
    user_id: int
    exclude_device_id: int
    opcode: int
    body: bytes
    def __init__(self, tenant_id: _Optional[bytes] = ..., user_id: _Optional[int] = ..., exclude_device_id: _Optional[int] = ..., opcode: _Optional[int] = ..., body: _Optional[bytes] = ...) -> None: ...

class MailboxPull(_message.Message):
    __slots__ = ("actor", "upstream")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_FIELD_NUMBER: _ClassVar[int]
    actor: Actor
    upstream: bytes
    def __init__(self, actor: _Optional[_Union[Actor, _Mapping]] = ..., upstream: _Optional[bytes] = ...) -> None: ...

class PushBatch(_message.Message):
    __slots__ = ("tenant_id", "targets", "positions", "hello", "wake_all", "node_id", "shards", "kicks")
    class Target(_message.Message):
        __slots__ = ("user_id", "entries")
        USER_ID_FIELD_NUMBER: _ClassVar[int]
        ENTRIES_FIELD_NUMBER: _ClassVar[int]
        user_id: int
        entries: _containers.RepeatedCompositeFieldContainer[_mailbox_pb2.MailboxEntry]
        def __init__(self, user_id: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[_mailbox_pb2.MailboxEntry, _Mapping]]] = ...) -> None: ...
    class Position(_message.Message):
        __slots__ = ("mailbox_seq", "message_id", "user_ids", "trace_id", "span_id", "inline")
        MAILBOX_SEQ_FIELD_NUMBER: _ClassVar[int]
        MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
        USER_IDS_FIELD_NUMBER: _ClassVar[int]
        TRACE_ID_FIELD_NUMBER: _ClassVar[int]
        SPAN_ID_FIELD_NUMBER: _ClassVar[int]
        INLINE_FIELD_NUMBER: _ClassVar[int]
        mailbox_seq: int
        message_id: bytes
        user_ids: _containers.RepeatedScalarFieldContainer[int]
        trace_id: bytes
        span_id: bytes
        inline: _containers.RepeatedCompositeFieldContainer[PushBatch.Inline]
        def __init__(self, mailbox_seq: _Optional[int] = ..., message_id: _Optional[bytes] = ..., user_ids: _Optional[_Iterable[int]] = ..., trace_id: _Optional[bytes] = ..., span_id: _Optional[bytes] = ..., inline: _Optional[_Iterable[_Union[PushBatch.Inline, _Mapping]]] = ...) -> None: ...
    class Inline(_message.Message):
        __slots__ = ("user_id", "prev_mailbox_seq", "entries")
        USER_ID_FIELD_NUMBER: _ClassVar[int]
        PREV_MAILBOX_SEQ_FIELD_NUMBER: _ClassVar[int]
        ENTRIES_FIELD_NUMBER: _ClassVar[int]
        user_id: int
        prev_mailbox_seq: int
        entries: _containers.RepeatedScalarFieldContainer[bytes]
        def __init__(self, user_id: _Optional[int] = ..., prev_mailbox_seq: _Optional[int] = ..., entries: _Optional[_Iterable[bytes]] = ...) -> None: ...
    class Kick(_message.Message):
        __slots__ = ("user_id", "device_id", "session_epoch")
        USER_ID_FIELD_NUMBER: _ClassVar[int]
        DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
        SESSION_EPOCH_FIELD_NUMBER: _ClassVar[int]
        user_id: int
        device_id: int
        session_epoch: int
        def __init__(self, user_id: _Optional[int] = ..., device_id: _Optional[int] = ..., session_epoch: _Optional[int] = ...) -> None: ...
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    POSITIONS_FIELD_NUMBER: _ClassVar[int]
    HELLO_FIELD_NUMBER: _ClassVar[int]
    WAKE_ALL_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    KICKS_FIELD_NUMBER: _ClassVar[int]
    tenant_id: bytes
    targets: _containers.RepeatedCompositeFieldContainer[PushBatch.Target]
    positions: _containers.RepeatedCompositeFieldContainer[PushBatch.Position]
    hello: bool
    wake_all: bool
    node_id: str
    shards: _containers.RepeatedScalarFieldContainer[int]
    kicks: _containers.RepeatedCompositeFieldContainer[PushBatch.Kick]
    def __init__(self, tenant_id: _Optional[bytes] = ..., targets: _Optional[_Iterable[_Union[PushBatch.Target, _Mapping]]] = ..., positions: _Optional[_Iterable[_Union[PushBatch.Position, _Mapping]]] = ..., hello: _Optional[bool] = ..., wake_all: _Optional[bool] = ..., node_id: _Optional[str] = ..., shards: _Optional[_Iterable[int]] = ..., kicks: _Optional[_Iterable[_Union[PushBatch.Kick, _Mapping]]] = ...) -> None: ...

class PresenceEntry(_message.Message):
    __slots__ = ("gateway_incarnation", "session_epoch", "expires_at_ms", "gateway_since_ms")
    GATEWAY_INCARNATION_FIELD_NUMBER: _ClassVar[int]
    SESSION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    GATEWAY_SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    gateway_incarnation: str
    session_epoch: int
    expires_at_ms: int
    gateway_since_ms: int
    def __init__(self, gateway_incarnation: _Optional[str] = ..., session_epoch: _Optional[int] = ..., expires_at_ms: _Optional[int] = ..., gateway_since_ms: _Optional[int] = ...) -> None: ...

class OutboxRecord(_message.Message):
    __slots__ = ("record", "recipients", "inline_body", "shard_count", "group_conversation_id", "membership_version", "event_type", "trace_id")
    RECORD_FIELD_NUMBER: _ClassVar[int]
    RECIPIENTS_FIELD_NUMBER: _ClassVar[int]
    INLINE_BODY_FIELD_NUMBER: _ClassVar[int]
    SHARD_COUNT_FIELD_NUMBER: _ClassVar[int]
    GROUP_CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERSHIP_VERSION_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    record: _message_pb2.MessageRecord
    recipients: _containers.RepeatedScalarFieldContainer[int]
    inline_body: bool
    shard_count: int
    group_conversation_id: bytes
    membership_version: int
    event_type: int
    trace_id: bytes
    def __init__(self, record: _Optional[_Union[_message_pb2.MessageRecord, _Mapping]] = ..., recipients: _Optional[_Iterable[int]] = ..., inline_body: _Optional[bool] = ..., shard_count: _Optional[int] = ..., group_conversation_id: _Optional[bytes] = ..., membership_version: _Optional[int] = ..., event_type: _Optional[int] = ..., trace_id: _Optional[bytes] = ...) -> None: ...
