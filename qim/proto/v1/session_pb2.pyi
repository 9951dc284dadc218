from qim.proto.v1 import history_pb2 as _history_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PullSessionList(_message.Message):
    __slots__ = ("cursor", "limit")
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    cursor: bytes
    limit: int
    def __init__(self, cursor: _Optional[bytes] = ..., limit: _Optional[int] = ...) -> None: ...

class SessionEntry(_message.Message):
    __slots__ = ("conversation_id", "kind", "last_message", "last_activity_id", "read_conversation_seq", "unread", "unread_exact", "joined_at", "left_at", "peer_user_id", "group_id", "group_title", "pinned", "muted_until", "hidden", "mentioned", "peer_read_seq", "state_version")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LAST_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVITY_ID_FIELD_NUMBER: _ClassVar[int]
    READ_CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    UNREAD_FIELD_NUMBER: _ClassVar[int]
    UNREAD_EXACT_FIELD_NUMBER: _ClassVar[int]
    JOINED_AT_FIELD_NUMBER: _ClassVar[int]
    LEFT_AT_FIELD_NUMBER: _ClassVar[int]
    PEER_USER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_TITLE_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    MUTED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_FIELD_NUMBER: _ClassVar[int]
    MENTIONED_FIELD_NUMBER: _ClassVar[int]
    PEER_READ_SEQ_FIELD_NUMBER: _ClassVar[int]
    STATE_VERSION_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    kind: int
    last_message: _history_pb2.HistoryItem
    last_activity_id: bytes
    read_conversation_seq: int
    unread: int
    unread_exact: bool
    joined_at: int
    left_at: int
    peer_user_id: int
    group_id: int
    group_title: str
    pinned: bool
    muted_until: int
    hidden: bool
    mentioned: bool
    peer_read_seq: int
    state_version: int
    def __init__(self, conversation_id: _Optional[bytes] = ..., kind: _Optional[int] = ..., last_message: _Optional[_Union[_history_pb2.HistoryItem, _Mapping]] = ..., last_activity_id: _Optional[bytes] = ..., read_conversation_seq: _Optional[int] = ..., unread: _Optional[int] = ..., unread_exact: _Optional[bool] = ..., joined_at: _Optional[int] = ..., left_at: _Optional[int] = ..., peer_user_id: _Optional[int] = ..., group_id: _Optional[int] = ..., group_title: _Optional[str] = ..., pinned: _Optional[bool] = ..., muted_until: _Optional[int] = ..., hidden: _Optional[bool] = ..., mentioned: _Optional[bool] = ..., peer_read_seq: _Optional[int] = ..., state_version: _Optional[int] = ...) -> None: ...

class SessionListBatch(_message.Message):
    __slots__ = ("sessions", "next_cursor", "has_more", "badge", "badge_version")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    BADGE_FIELD_NUMBER: _ClassVar[int]
    BADGE_VERSION_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[SessionEntry]
    next_cursor: bytes
    has_more: bool
    badge: int
    badge_version: int
    def __init__(self, sessions: _Optional[_Iterable[_Union[SessionEntry, _Mapping]]] = ..., next_cursor: _Optional[bytes] = ..., has_more: _Optional[bool] = ..., badge: _Optional[int] = ..., badge_version: _Optional[int] = ...) -> None: ...

class SessionDelta(_message.Message):
    __slots__ = ("sessions", "badge", "badge_version")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    BADGE_FIELD_NUMBER: _ClassVar[int]
    BADGE_VERSION_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[SessionEntry]
    badge: int
    badge_version: int
    def __init__(self, sessions: _Optional[_Iterable[_Union[SessionEntry, _Mapping]]] = ..., badge: _Optional[int] = ..., badge_version: _Optional[int] = ...) -> None: ...

class MarkRead(_message.Message):
    __slots__ = ("conversation_id", "read_conversation_seq", "peer_user_id")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    READ_CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    PEER_USER_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    read_conversation_seq: int
    peer_user_id: int
    def __init__(self, conversation_id: _Optional[bytes] = ..., read_conversation_seq: _Optional[int] = ..., peer_user_id: _Optional[int] = ...) -> None: ...

class MarkReadOk(_message.Message):
    __slots__ = ("conversation_id", "read_conversation_seq")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    READ_CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    read_conversation_seq: int
    def __init__(self, conversation_id: _Optional[bytes] = ..., read_conversation_seq: _Optional[int] = ...) -> None: ...

class PullProfiles(_message.Message):
    __slots__ = ("user_ids",)
    USER_IDS_FIELD_NUMBER: _ClassVar[int]
    user_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, user_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class Profile(_message.Message):
    __slots__ = ("user_id", "display_name")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    user_id: int
    display_name: str
    def __init__(self, user_id: _Optional[int] = ..., display_name: _Optional[str] = ...) -> None: ...

class ProfilesBatch(_message.Message):
    __slots__ = ("profiles",)
    PROFILES_FIELD_NUMBER: _ClassVar[int]
    profiles: _containers.RepeatedCompositeFieldContainer[Profile]
    def __init__(self, profiles: _Optional[_Iterable[_Union[Profile, _Mapping]]] = ...) -> None: ...

class ReadSync(_message.Message):
    __slots__ = ("conversation_id", "read_conversation_seq")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    READ_CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    read_conversation_seq: int
    def __init__(self, conversation_id: _Optional[bytes] = ..., read_conversation_seq: _Optional[int] = ...) -> None: ...
