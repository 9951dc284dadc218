from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ProjectedMessage(_message.Message):
    __slots__ = ("conversation_id", "conversation_seq", "created_at_ms", "sender_id", "users", "trace_id", "shard", "mailbox_seq")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    SENDER_ID_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    MAILBOX_SEQ_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    conversation_seq: int
    created_at_ms: int
    sender_id: int
    users: _containers.RepeatedScalarFieldContainer[int]
    trace_id: bytes
    shard: int
    mailbox_seq: int
    def __init__(self, conversation_id: _Optional[bytes] = ..., conversation_seq: _Optional[int] = ..., created_at_ms: _Optional[int] = ..., sender_id: _Optional[int] = ..., users: _Optional[_Iterable[int]] = ..., trace_id: _Optional[bytes] = ..., shard: _Optional[int] = ..., mailbox_seq: _Optional[int] = ...) -> None: ...

class Projection(_message.Message):
    __slots__ = ("tenant_id", "messages")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    tenant_id: bytes
    messages: _containers.RepeatedCompositeFieldContainer[ProjectedMessage]
    def __init__(self, tenant_id: _Optional[bytes] = ..., messages: _Optional[_Iterable[_Union[ProjectedMessage, _Mapping]]] = ...) -> None: ...
