from qim.proto.v1 import mailbox_pb2 as _mailbox_pb2
from qim.proto.v1 import message_pb2 as _message_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Actor(_message.Message):
    __slots__ = ("tenant_id", "user_id", "device_id")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: bytes
    user_id: int
    device_id: int
    def __init__(self, tenant_id: _Optional[bytes] = ..., user_id: _Optional[int] = ..., device_id: _Optional[int] = ...) -> None: ...

class WriterSend(_message.Message):
    __slots__ = ("actor", "upstream")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_FIELD_NUMBER: _ClassVar[int]
    actor: Actor
    upstream: bytes
    def __init__(self, actor: _Optional[_Union[Actor, _Mapping]] = ..., upstream: _Optional[bytes] = ...) -> None: ...

class MailboxPull(_message.Message):
    __slots__ = ("actor", "upstream")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_FIELD_NUMBER: _ClassVar[int]
    actor: Actor
    upstream: bytes
    def __init__(self, actor: _Optional[_Union[Actor, _Mapping]] = ..., upstream: _Optional[bytes] = ...) -> None: ...

class PushBatch(_message.Message):
    __slots__ = ("tenant_id", "targets")
    class Target(_message.Message):
        __slots__ = ("user_id", "entries")
        USER_ID_FIELD_NUMBER: _ClassVar[int]
        ENTRIES_FIELD_NUMBER: _ClassVar[int]
        user_id: int
        entries: _containers.RepeatedCompositeFieldContainer[_mailbox_pb2.MailboxEntry]
        def __init__(self, user_id: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[_mailbox_pb2.MailboxEntry, _Mapping]]] = ...) -> None: ...
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    tenant_id: bytes
    targets: _containers.RepeatedCompositeFieldContainer[PushBatch.Target]
    def __init__(self, tenant_id: _Optional[bytes] = ..., targets: _Optional[_Iterable[_Union[PushBatch.Target, _Mapping]]] = ...) -> None: ...

class OutboxRecord(_message.Message):
    __slots__ = ("record", "recipients", "inline_body", "shard_count")
    RECORD_FIELD_NUMBER: _ClassVar[int]
    RECIPIENTS_FIELD_NUMBER: _ClassVar[int]
    INLINE_BODY_FIELD_NUMBER: _ClassVar[int]
    SHARD_COUNT_FIELD_NUMBER: _ClassVar[int]
    record: _message_pb2.MessageRecord
    recipients: _containers.RepeatedScalarFieldContainer[int]
    inline_body: bool
    shard_count: int
    def __init__(self, record: _Optional[_Union[_message_pb2.MessageRecord, _Mapping]] = ..., recipients: _Optional[_Iterable[int]] = ..., inline_body: _Optional[bool] = ..., shard_count: _Optional[int] = ...) -> None: ...
