from qim.proto.v1 import common_pb2 as _common_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SendMessage(_message.Message):
    __slots__ = ("client_message_id", "conversation_id", "recipient_user_id", "message_type", "custom_type", "body", "group_id")
    CLIENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    RECIPIENT_USER_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_TYPE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    client_message_id: bytes
    conversation_id: bytes
    recipient_user_id: int
    message_type: _common_pb2.MessageType
    custom_type: bytes
    body: bytes
    group_id: int
    def __init__(self, client_message_id: _Optional[bytes] = ..., conversation_id: _Optional[bytes] = ..., recipient_user_id: _Optional[int] = ..., message_type: _Optional[_Union[_common_pb2.MessageType, str]] = ..., custom_type: _Optional[bytes] = ..., body: _Optional[bytes] = ..., group_id: _Optional[int] = ...) -> None: ...

class SendAck(_message.Message):
    __slots__ = ("client_message_id", "message_id", "conversation_id", "conversation_seq", "created_at_ms")
    CLIENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    client_message_id: bytes
    message_id: bytes
    conversation_id: bytes
    conversation_seq: int
    created_at_ms: int
    def __init__(self, client_message_id: _Optional[bytes] = ..., message_id: _Optional[bytes] = ..., conversation_id: _Optional[bytes] = ..., conversation_seq: _Optional[int] = ..., created_at_ms: _Optional[int] = ...) -> None: ...

class MessageRecord(_message.Message):
    __slots__ = ("tenant_id", "message_id", "conversation_id", "conversation_seq", "sender_id", "sender_device_id", "client_message_id", "message_type", "custom_type", "body", "created_at_ms")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    SENDER_ID_FIELD_NUMBER: _ClassVar[int]
    SENDER_DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_TYPE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    tenant_id: bytes
    message_id: bytes
    conversation_id: bytes
    conversation_seq: int
    sender_id: int
    sender_device_id: int
    client_message_id: bytes
    message_type: _common_pb2.MessageType
    custom_type: bytes
    body: bytes
    created_at_ms: int
    def __init__(self, tenant_id: _Optional[bytes] = ..., message_id: _Optional[bytes] = ..., conversation_id: _Optional[bytes] = ..., conversation_seq: _Optional[int] = ..., sender_id: _Optional[int] = ..., sender_device_id: _Optional[int] = ..., client_message_id: _Optional[bytes] = ..., message_type: _Optional[_Union[_common_pb2.MessageType, str]] = ..., custom_type: _Optional[bytes] = ..., body: _Optional[bytes] = ..., created_at_ms: _Optional[int] = ...) -> None: ...
