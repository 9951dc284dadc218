from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReportReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REPORT_REASON_UNSPECIFIED: _ClassVar[ReportReason]
    REPORT_REASON_SPAM: _ClassVar[ReportReason]
    REPORT_REASON_ABUSE: _ClassVar[ReportReason]
    REPORT_REASON_ILLEGAL: _ClassVar[ReportReason]
    REPORT_REASON_OTHER: _ClassVar[ReportReason]
REPORT_REASON_UNSPECIFIED: ReportReason
REPORT_REASON_SPAM: ReportReason
REPORT_REASON_ABUSE: ReportReason
REPORT_REASON_ILLEGAL: ReportReason
REPORT_REASON_OTHER: ReportReason

class Report(_message.Message):
    __slots__ = ("conversation_id", "message_id", "reason", "text", "client_report_id", "peer_user_id")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_REPORT_ID_FIELD_NUMBER: _ClassVar[int]
    PEER_USER_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    message_id: bytes
    reason: ReportReason
    text: str
    client_report_id: bytes
    peer_user_id: int
    def __init__(self, conversation_id: _Optional[bytes] = ..., message_id: _Optional[bytes] = ..., reason: _Optional[_Union[ReportReason, str, int]] = ..., text: _Optional[str] = ..., client_report_id: _Optional[bytes] = ..., peer_user_id: _Optional[int] = ...) -> None: ...

class ReportOk(_message.Message):
    __slots__ = ("report_id", "duplicate")
    REPORT_ID_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    report_id: str
    duplicate: bool
    def __init__(self, report_id: _Optional[str] = ..., duplicate: _Optional[bool] = ...) -> None: ...
