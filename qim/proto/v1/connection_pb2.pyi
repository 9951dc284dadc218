from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Auth(_message.Message):
    __slots__ = ("token", "client_version")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    CLIENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    token: str
    client_version: str
    def __init__(self, token: _Optional[str] = ..., client_version: _Optional[str] = ...) -> None: ...

class AuthOk(_message.Message):
    __slots__ = ("tenant_id", "user_id", "device_id", "server_time_ms", "heartbeat_s", "mailbox_lane", "mailbox_shard", "max_body_bytes", "send_rate_per_s", "send_burst")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    SERVER_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_S_FIELD_NUMBER: _ClassVar[int]
    MAILBOX_LANE_FIELD_NUMBER: _ClassVar[int]
    MAILBOX_SHARD_FIELD_NUMBER: _ClassVar[int]
    MAX_BODY_BYTES_FIELD_NUMBER: _ClassVar[int]
    SEND_RATE_PER_S_FIELD_NUMBER: _ClassVar[int]
    SEND_BURST_FIELD_NUMBER: _ClassVar[int]
    tenant_id: bytes
    user_id: int
    device_id: int
    server_time_ms: int
    heartbeat_s: int
    mailbox_lane: int
    mailbox_shard: int
    max_body_bytes: int
    send_rate_per_s: int
    send_burst: int
    def __init__(self, tenant_id: _Optional[bytes] = ..., user_id: _Optional[int] = ..., device_id: _Optional[int] = ..., server_time_ms: _Optional[int] = ..., heartbeat_s: _Optional[int] = ..., mailbox_lane: _Optional[int] = ..., mailbox_shard: _Optional[int] = ..., max_body_bytes: _Optional[int] = ..., send_rate_per_s: _Optional[int] = ..., send_burst: _Optional[int] = ...) -> None: ...

class Ping(_message.Message):
    __slots__ = ("client_time_ms",)
    CLIENT_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    client_time_ms: int
    def __init__(self, client_time_ms: _Optional[int] = ...) -> None: ...

class Pong(_message.Message):
    __slots__ = ("server_time_ms", "heartbeat_s")
    SERVER_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_S_FIELD_NUMBER: _ClassVar[int]
    server_time_ms: int
    heartbeat_s: int
    def __init__(self, server_time_ms: _Optional[int] = ..., heartbeat_s: _Optional[int] = ...) -> None: ...

class Kicked(_message.Message):
    __slots__ = ("reason", "message", "until_ms")
    class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        REASON_UNSPECIFIED: _ClassVar[Kicked.Reason]
        REPLACED: _ClassVar[Kicked.Reason]
        SERVER_SHUTDOWN: _ClassVar[Kicked.Reason]
        TOKEN_EXPIRED: _ClassVar[Kicked.Reason]
        REVOKED: _ClassVar[Kicked.Reason]
        BANNED: _ClassVar[Kicked.Reason]
    REASON_UNSPECIFIED: Kicked.Reason
    REPLACED: Kicked.Reason
    SERVER_SHUTDOWN: Kicked.Reason
    TOKEN_EXPIRED: Kicked.Reason
    REVOKED: Kicked.Reason
    BANNED: Kicked.Reason
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    reason: Kicked.Reason
    message: str
    until_ms: int
    def __init__(self, reason: _Optional[_Union[Kicked.Reason, str, int]] = ..., message: _Optional[str] = ..., until_ms: _Optional[int] = ...) -> None: ...
