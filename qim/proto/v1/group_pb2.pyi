from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateGroup(_message.Message):
    __slots__ = ("group_id", "members", "client_message_id", "title")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    group_id: int
    members: _containers.RepeatedScalarFieldContainer[int]
    client_message_id: bytes
    title: str
    def __init__(self, group_id: _Optional[int] = ..., members: _Optional[_Iterable[int]] = ..., client_message_id: _Optional[bytes] = ..., title: _Optional[str] = ...) -> None: ...

class SetGroupTitle(_message.Message):
    __slots__ = ("group_id", "title", "client_message_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    CLIENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: int
    title: str
    client_message_id: bytes
    def __init__(self, group_id: _Optional[int] = ..., title: _Optional[str] = ..., client_message_id: _Optional[bytes] = ...) -> None: ...

class GroupOk(_message.Message):
    __slots__ = ("conversation_id", "membership_version", "conversation_seq")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERSHIP_VERSION_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    membership_version: int
    conversation_seq: int
    def __init__(self, conversation_id: _Optional[bytes] = ..., membership_version: _Optional[int] = ..., conversation_seq: _Optional[int] = ...) -> None: ...

class LeaveGroup(_message.Message):
    __slots__ = ("group_id", "client_message_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: int
    client_message_id: bytes
    def __init__(self, group_id: _Optional[int] = ..., client_message_id: _Optional[bytes] = ...) -> None: ...

class PullMembers(_message.Message):
    __slots__ = ("group_id", "after_user_id", "limit")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_USER_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    group_id: int
    after_user_id: int
    limit: int
    def __init__(self, group_id: _Optional[int] = ..., after_user_id: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class Member(_message.Message):
    __slots__ = ("user_id", "joined_at", "owner")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    JOINED_AT_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    user_id: int
    joined_at: int
    owner: bool
    def __init__(self, user_id: _Optional[int] = ..., joined_at: _Optional[int] = ..., owner: _Optional[bool] = ...) -> None: ...

class MembersBatch(_message.Message):
    __slots__ = ("members", "has_more", "membership_version")
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    MEMBERSHIP_VERSION_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[Member]
    has_more: bool
    membership_version: int
    def __init__(self, members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., has_more: _Optional[bool] = ..., membership_version: _Optional[int] = ...) -> None: ...
