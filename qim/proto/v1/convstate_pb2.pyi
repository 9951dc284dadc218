from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class SetConversationState(_message.Message):
    __slots__ = ("conversation_id", "pinned", "muted_until", "hidden", "peer_user_id")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    MUTED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_FIELD_NUMBER: _ClassVar[int]
    PEER_USER_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    pinned: bool
    muted_until: int
    hidden: bool
    peer_user_id: int
    def __init__(self, conversation_id: _Optional[bytes] = ..., pinned: _Optional[bool] = ..., muted_until: _Optional[int] = ..., hidden: _Optional[bool] = ..., peer_user_id: _Optional[int] = ...) -> None: ...

class ConversationState(_message.Message):
    __slots__ = ("conversation_id", "pinned", "muted_until", "hidden", "version")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    MUTED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    pinned: bool
    muted_until: int
    hidden: bool
    version: int
    def __init__(self, conversation_id: _Optional[bytes] = ..., pinned: _Optional[bool] = ..., muted_until: _Optional[int] = ..., hidden: _Optional[bool] = ..., version: _Optional[int] = ...) -> None: ...

class SetReceipts(_message.Message):
    __slots__ = ("enabled",)
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    def __init__(self, enabled: _Optional[bool] = ...) -> None: ...

class ReceiptsOk(_message.Message):
    __slots__ = ("enabled",)
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    def __init__(self, enabled: _Optional[bool] = ...) -> None: ...

class ReadReceipt(_message.Message):
    __slots__ = ("conversation_id", "reader_user_id", "read_conversation_seq")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    READER_USER_ID_FIELD_NUMBER: _ClassVar[int]
    READ_CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    reader_user_id: int
    read_conversation_seq: int
    def __init__(self, conversation_id: _Optional[bytes] = ..., reader_user_id: _Optional[int] = ..., read_conversation_seq: _Optional[int] = ...) -> None: ...

class PullReaders(_message.Message):
    __slots__ = ("conversation_id", "conversation_seq", "peer_user_id")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    PEER_USER_ID_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    conversation_seq: int
    peer_user_id: int
    def __init__(self, conversation_id: _Optional[bytes] = ..., conversation_seq: _Optional[int] = ..., peer_user_id: _Optional[int] = ...) -> None: ...

class ReadersBatch(_message.Message):
    __slots__ = ("conversation_id", "conversation_seq", "reader_user_ids", "counted")
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_SEQ_FIELD_NUMBER: _ClassVar[int]
    READER_USER_IDS_FIELD_NUMBER: _ClassVar[int]
    COUNTED_FIELD_NUMBER: _ClassVar[int]
    conversation_id: bytes
    conversation_seq: int
    reader_user_ids: _containers.RepeatedScalarFieldContainer[int]
    counted: int
    def __init__(self, conversation_id: _Optional[bytes] = ..., conversation_seq: _Optional[int] = ..., reader_user_ids: _Optional[_Iterable[int]] = ..., counted: _Optional[int] = ...) -> None: ...
