from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReactionCount(_message.Message):
    __slots__ = ("emoji", "count", "mine")
    EMOJI_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    MINE_FIELD_NUMBER: _ClassVar[int]
    emoji: str
    count: int
    mine: bool
    def __init__(self, emoji: _Optional[str] = ..., count: _Optional[int] = ..., mine: _Optional[bool] = ...) -> None: ...

class MessageReactionSummary(_message.Message):
    __slots__ = ("counts", "version")
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    counts: _containers.RepeatedCompositeFieldContainer[ReactionCount]
    version: int
    def __init__(self, counts: _Optional[_Iterable[_Union[ReactionCount, _Mapping]]] = ..., version: _Optional[int] = ...) -> None: ...

class React(_message.Message):
    __slots__ = ("conversation_id", "peer_user_id", "message_id", "emoji", "remove")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    PEER_USER_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    EMOJI_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    peer_user_id: int
    message_id: bytes
    emoji: str
    remove: bool
    def __init__(self, conversation_id: _Optional[bytes] = ..., peer_user_id: _Optional[int] = ..., message_id: _Optional[bytes] = ..., emoji: _Optional[str] = ..., remove: _Optional[bool] = ...) -> None: ...

class ReactOk(_message.Message):
    __slots__ = ("summary", "changed")
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    summary: MessageReactionSummary
    changed: bool
    def __init__(self, summary: _Optional[_Union[MessageReactionSummary, _Mapping]] = ..., changed: _Optional[bool] = ...) -> None: ...

class ReactionEvents(_message.Message):
    __slots__ = ("conversation_id", "message_id", "user_id", "emoji", "removed", "counts", "device_id", "version")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    EMOJI_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    message_id: bytes
    user_id: int
    emoji: str
    removed: bool
    counts: _containers.RepeatedCompositeFieldContainer[ReactionCount]
    device_id: int
    version: int
    def __init__(self, conversation_id: _Optional[bytes] = ..., message_id: _Optional[bytes] = ..., user_id: _Optional[int] = ..., emoji: _Optional[str] = ..., removed: _Optional[bool] = ..., counts: _Optional[_Iterable[_Union[ReactionCount, _Mapping]]] = ..., device_id: _Optional[int] = ..., version: _Optional[int] = ...) -> None: ...

class Typing(_message.Message):
    __slots__ = ("conversation_id", "peer_user_id", "stopped")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    PEER_USER_ID_FIELD_NUMBER: _ClassVar[int]
    STOPPED_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    peer_user_id: int
    stopped: bool
    def __init__(self, conversation_id: _Optional[bytes] = ..., peer_user_id: _Optional[int] = ..., stopped: _Optional[bool] = ...) -> None: ...

class TypingOk(_message.Message):
    __slots__ = ("delivered", "retry_after_ms")
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    delivered: bool
    retry_after_ms: int
    def __init__(self, delivered: _Optional[bool] = ..., retry_after_ms: _Optional[int] = ...) -> None: ...

class TypingEvents(_message.Message):
    __slots__ = ("conversation_id", "user_id", "device_id", "stopped", "expires_in_ms")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    STOPPED_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_MS_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    user_id: int
    device_id: int
    stopped: bool
    expires_in_ms: int
    def __init__(self, conversation_id: _Optional[bytes] = ..., user_id: _Optional[int] = ..., device_id: _Optional[int] = ..., stopped: _Optional[bool] = ..., expires_in_ms: _Optional[int] = ...) -> None: ...

class EphemeralDone(_message.Message):
    __slots__ = ("reply", "event_opcode", "event", "user_ids")
    REPLY_FIELD_NUMBER: _ClassVar[int]
    EVENT_OPCODE_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    USER_IDS_FIELD_NUMBER: _ClassVar[int]
    reply: bytes
    event_opcode: int
    event: bytes
    user_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, reply: _Optional[bytes] = ..., event_opcode: _Optional[int] = ..., event: _Optional[bytes] = ..., user_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class EphemeralFrames(_message.Message):
    __slots__ = ("tenant_id", "user_ids", "opcode", "body", "exclude_user_id", "exclude_device_id")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    USER_IDS_FIELD_NUMBER: _ClassVar[int]
    OPCODE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_USER_ID_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: bytes
    user_ids: _containers.RepeatedScalarFieldContainer[int]
    opcode: int
    body: bytes
    exclude_user_id: int
    exclude_device_id: int
    def __init__(self, tenant_id: _Optional[bytes] = ..., user_ids: _Optional[_Iterable[int]] = ..., opcode: _Optional[int] = ..., body: _Optional[bytes] = ..., exclude_user_id: _Optional[int] = ..., exclude_device_id: _Optional[int] = ...) -> None: ...
