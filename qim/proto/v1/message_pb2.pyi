from qim.proto.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MessageState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MESSAGE_STATE_NORMAL: _ClassVar[MessageState]
    MESSAGE_STATE_RECALLED: _ClassVar[MessageState]
    MESSAGE_STATE_DELETED: _ClassVar[MessageState]
MESSAGE_STATE_NORMAL: MessageState
MESSAGE_STATE_RECALLED: MessageState
MESSAGE_STATE_DELETED: MessageState

class SendMessage(_message.Message):
    __slots__ = ("client_message_id", "conversation_id", "recipient_user_id", "message_type", "custom_type", "body", "group_id", "previous_client_message_id", "reply_to_message_id", "mention_user_ids", "mention_all")
    CLIENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    RECIPIENT_USER_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_TYPE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_CLIENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    REPLY_TO_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    MENTION_USER_IDS_FIELD_NUMBER: _ClassVar[int]
    MENTION_ALL_FIELD_NUMBER: _ClassVar[int]
    client_message_id: bytes
    conversation_id: bytes
    recipient_user_id: int
    message_type: _common_pb2.MessageType
    custom_type: bytes
    body: bytes
    group_id: int
    previous_client_message_id: bytes
    reply_to_message_id: bytes
    mention_user_ids: _containers.RepeatedScalarFieldContainer[int]
    mention_all: bool
    def __init__(self, client_message_id: _Optional[bytes] = ..., conversation_id: _Optional[bytes] = ..., recipient_user_id: _Optional[int] = ..., message_type: _Optional[_Union[_common_pb2.MessageType, str, int]] = ..., custom_type: _Optional[bytes] = ..., body: _Optional[bytes] = ..., group_id: _Optional[int] = ..., previous_client_message_id: _Optional[bytes] = ..., reply_to_message_id: _Optional[bytes] = ..., mention_user_ids: _Optional[_Iterable[int]] = ..., mention_all: _Optional[bool] = ...) -> None: ...

class ReplyRef(_message.Message):
    __slots__ = ("message_id", "conversation_seq", "sender_id", "message_type", "state", "preview")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    SENDER_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PREVIEW_FIELD_NUMBER: _ClassVar[int]
    message_id: bytes
    conversation_seq: int
    sender_id: int
    message_type: _common_pb2.MessageType
    state: MessageState
    preview: str
    def __init__(self, message_id: _Optional[bytes] = ..., conversation_seq: _Optional[int] = ..., sender_id: _Optional[int] = ..., message_type: _Optional[_Union[_common_pb2.MessageType, str, int]] = ..., state: _Optional[_Union[MessageState, str, int]] = ..., preview: _Optional[str] = ...) -> None: ...

class EditTrail(_message.Message):
    __slots__ = ("edited_at_ms", "control_message_ids", "control_seqs")
    EDITED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CONTROL_MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    CONTROL_SEQS_FIELD_NUMBER: _ClassVar[int]
    edited_at_ms: int
    control_message_ids: _containers.RepeatedScalarFieldContainer[bytes]
    control_seqs: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, edited_at_ms: _Optional[int] = ..., control_message_ids: _Optional[_Iterable[bytes]] = ..., control_seqs: _Optional[_Iterable[int]] = ...) -> None: ...

class SendAck(_message.Message):
    __slots__ = ("client_message_id", "message_id", "conversation_id", "conversation_seq", "created_at_ms", "replaced", "body")
    CLIENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    REPLACED_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    client_message_id: bytes
    message_id: bytes
    conversation_id: bytes
    conversation_seq: int
    created_at_ms: int
    replaced: bool
    body: bytes
    def __init__(self, client_message_id: _Optional[bytes] = ..., message_id: _Optional[bytes] = ..., conversation_id: _Optional[bytes] = ..., conversation_seq: _Optional[int] = ..., created_at_ms: _Optional[int] = ..., replaced: _Optional[bool] = ..., body: _Optional[bytes] = ...) -> None: ...

class MessageRecord(_message.Message):
    __slots__ = ("tenant_id", "message_id", "conversation_id", "conversation_seq", "sender_id", "sender_device_id", "client_message_id", "message_type", "custom_type", "body", "created_at_ms", "state", "reply", "mention_user_ids", "mention_all", "version", "edits")
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
    STATE_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    MENTION_USER_IDS_FIELD_NUMBER: _ClassVar[int]
    MENTION_ALL_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    EDITS_FIELD_NUMBER: _ClassVar[int]
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
    state: MessageState
    reply: ReplyRef
    mention_user_ids: _containers.RepeatedScalarFieldContainer[int]
    mention_all: bool
    version: int
    edits: EditTrail
    def __init__(self, tenant_id: _Optional[bytes] = ..., message_id: _Optional[bytes] = ..., conversation_id: _Optional[bytes] = ..., conversation_seq: _Optional[int] = ..., sender_id: _Optional[int] = ..., sender_device_id: _Optional[int] = ..., client_message_id: _Optional[bytes] = ..., message_type: _Optional[_Union[_common_pb2.MessageType, str, int]] = ..., custom_type: _Optional[bytes] = ..., body: _Optional[bytes] = ..., created_at_ms: _Optional[int] = ..., state: _Optional[_Union[MessageState, str, int]] = ..., reply: _Optional[_Union[ReplyRef, _Mapping]] = ..., mention_user_ids: _Optional[_Iterable[int]] = ..., mention_all: _Optional[bool] = ..., version: _Optional[int] = ..., edits: _Optional[_Union[EditTrail, _Mapping]] = ...) -> None: ...

class RecallMessage(_message.Message):
    __slots__ = ("conversation_id", "message_id", "client_message_id", "peer_user_id")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    PEER_USER_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    message_id: bytes
    client_message_id: bytes
    peer_user_id: int
    def __init__(self, conversation_id: _Optional[bytes] = ..., message_id: _Optional[bytes] = ..., client_message_id: _Optional[bytes] = ..., peer_user_id: _Optional[int] = ...) -> None: ...

class RecallOk(_message.Message):
    __slots__ = ("message_id", "state", "control_conversation_seq")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CONTROL_CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    message_id: bytes
    state: MessageState
    control_conversation_seq: int
    def __init__(self, message_id: _Optional[bytes] = ..., state: _Optional[_Union[MessageState, str, int]] = ..., control_conversation_seq: _Optional[int] = ...) -> None: ...

class ControlEvent(_message.Message):
    __slots__ = ("membership", "state_change", "title_change", "edit")
    MEMBERSHIP_FIELD_NUMBER: _ClassVar[int]
    STATE_CHANGE_FIELD_NUMBER: _ClassVar[int]
    TITLE_CHANGE_FIELD_NUMBER: _ClassVar[int]
    EDIT_FIELD_NUMBER: _ClassVar[int]
    membership: MembershipChange
    state_change: MessageStateChange
    title_change: GroupTitleChange
    edit: MessageEdit
    def __init__(self, membership: _Optional[_Union[MembershipChange, _Mapping]] = ..., state_change: _Optional[_Union[MessageStateChange, _Mapping]] = ..., title_change: _Optional[_Union[GroupTitleChange, _Mapping]] = ..., edit: _Optional[_Union[MessageEdit, _Mapping]] = ...) -> None: ...

class EditMessage(_message.Message):
    __slots__ = ("conversation_id", "message_id", "client_message_id", "peer_user_id", "body")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    PEER_USER_ID_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    message_id: bytes
    client_message_id: bytes
    peer_user_id: int
    body: bytes
    def __init__(self, conversation_id: _Optional[bytes] = ..., message_id: _Optional[bytes] = ..., client_message_id: _Optional[bytes] = ..., peer_user_id: _Optional[int] = ..., body: _Optional[bytes] = ...) -> None: ...

class EditOk(_message.Message):
    __slots__ = ("message_id", "version", "control_conversation_seq", "edited_at_ms", "replaced", "body")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CONTROL_CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    EDITED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    REPLACED_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    message_id: bytes
    version: int
    control_conversation_seq: int
    edited_at_ms: int
    replaced: bool
    body: bytes
    def __init__(self, message_id: _Optional[bytes] = ..., version: _Optional[int] = ..., control_conversation_seq: _Optional[int] = ..., edited_at_ms: _Optional[int] = ..., replaced: _Optional[bool] = ..., body: _Optional[bytes] = ...) -> None: ...

class MessageEdit(_message.Message):
    __slots__ = ("message_id", "conversation_seq", "version", "body", "edited_at_ms")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    EDITED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    message_id: bytes
    conversation_seq: int
    version: int
    body: bytes
    edited_at_ms: int
    def __init__(self, message_id: _Optional[bytes] = ..., conversation_seq: _Optional[int] = ..., version: _Optional[int] = ..., body: _Optional[bytes] = ..., edited_at_ms: _Optional[int] = ...) -> None: ...

class GroupTitleChange(_message.Message):
    __slots__ = ("group_id", "title", "actor_user_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    ACTOR_USER_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: int
    title: str
    actor_user_id: int
    def __init__(self, group_id: _Optional[int] = ..., title: _Optional[str] = ..., actor_user_id: _Optional[int] = ...) -> None: ...

class MembershipChange(_message.Message):
    __slots__ = ("kind", "users", "actor_user_id", "membership_version", "group_id", "title")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[MembershipChange.Kind]
        CREATED: _ClassVar[MembershipChange.Kind]
        JOINED: _ClassVar[MembershipChange.Kind]
        LEFT: _ClassVar[MembershipChange.Kind]
        REMOVED: _ClassVar[MembershipChange.Kind]
    KIND_UNSPECIFIED: MembershipChange.Kind
    CREATED: MembershipChange.Kind
    JOINED: MembershipChange.Kind
    LEFT: MembershipChange.Kind
    REMOVED: MembershipChange.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    ACTOR_USER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERSHIP_VERSION_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    kind: MembershipChange.Kind
    users: _containers.RepeatedScalarFieldContainer[int]
    actor_user_id: int
    membership_version: int
    group_id: int
    title: str
    def __init__(self, kind: _Optional[_Union[MembershipChange.Kind, str, int]] = ..., users: _Optional[_Iterable[int]] = ..., actor_user_id: _Optional[int] = ..., membership_version: _Optional[int] = ..., group_id: _Optional[int] = ..., title: _Optional[str] = ...) -> None: ...

class MessageStateChange(_message.Message):
    __slots__ = ("message_id", "state", "conversation_seq")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    message_id: bytes
    state: MessageState
    conversation_seq: int
    def __init__(self, message_id: _Optional[bytes] = ..., state: _Optional[_Union[MessageState, str, int]] = ..., conversation_seq: _Optional[int] = ...) -> None: ...
