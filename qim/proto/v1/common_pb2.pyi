from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MessageType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MESSAGE_TYPE_UNKNOWN: _ClassVar[MessageType]
    MESSAGE_TYPE_TEXT: _ClassVar[MessageType]
    MESSAGE_TYPE_MEDIA: _ClassVar[MessageType]
    MESSAGE_TYPE_CUSTOM: _ClassVar[MessageType]
    MESSAGE_TYPE_CONTROL: _ClassVar[MessageType]

class ErrorCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_CODE_UNSPECIFIED: _ClassVar[ErrorCode]
    BAD_FRAME: _ClassVar[ErrorCode]
    UNAUTHENTICATED: _ClassVar[ErrorCode]
    FORBIDDEN: _ClassVar[ErrorCode]
    NOT_FOUND: _ClassVar[ErrorCode]
    INVALID_ARGUMENT: _ClassVar[ErrorCode]
    PAYLOAD_TOO_LARGE: _ClassVar[ErrorCode]
    RATE_LIMITED: _ClassVar[ErrorCode]
    CONFLICT: _ClassVar[ErrorCode]
    CURSOR_EXPIRED: _ClassVar[ErrorCode]
    MAILBOX_DIRTY: _ClassVar[ErrorCode]
    UNAVAILABLE: _ClassVar[ErrorCode]
    INTERNAL: _ClassVar[ErrorCode]
    POLICY_REFUSED: _ClassVar[ErrorCode]
    BANNED: _ClassVar[ErrorCode]
MESSAGE_TYPE_UNKNOWN: MessageType
MESSAGE_TYPE_TEXT: MessageType
MESSAGE_TYPE_MEDIA: MessageType
MESSAGE_TYPE_CUSTOM: MessageType
MESSAGE_TYPE_CONTROL: MessageType
ERROR_CODE_UNSPECIFIED: ErrorCode
BAD_FRAME: ErrorCode
UNAUTHENTICATED: ErrorCode
FORBIDDEN: ErrorCode
NOT_FOUND: ErrorCode
INVALID_ARGUMENT: ErrorCode
PAYLOAD_TOO_LARGE: ErrorCode
RATE_LIMITED: ErrorCode
CONFLICT: ErrorCode
CURSOR_EXPIRED: ErrorCode
MAILBOX_DIRTY: ErrorCode
UNAVAILABLE: ErrorCode
INTERNAL: ErrorCode
POLICY_REFUSED: ErrorCode
BANNED: ErrorCode

class Error(_message.Message):
    __slots__ = ("code", "message", "request_opcode", "retry_after_ms", "until_ms")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_OPCODE_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    code: ErrorCode
    message: str
    request_opcode: int
    retry_after_ms: int
    until_ms: int
    def __init__(self, code: _Optional[_Union[ErrorCode, str, int]] = ..., message: _Optional[str] = ..., request_opcode: _Optional[int] = ..., retry_after_ms: _Optional[int] = ..., until_ms: _Optional[int] = ...) -> None: ...
