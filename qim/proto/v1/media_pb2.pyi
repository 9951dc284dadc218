from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class MediaRef(_message.Message):
    __slots__ = ("media_id", "mime", "size", "width", "height", "duration_ms", "sha256", "thumbnail", "owner", "name", "signature")
    MEDIA_ID_FIELD_NUMBER: _ClassVar[int]
    MIME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    THUMBNAIL_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    media_id: str
    mime: str
    size: int
    width: int
    height: int
    duration_ms: int
    sha256: bytes
    thumbnail: bytes
    owner: int
    name: str
    signature: bytes
    def __init__(self, media_id: _Optional[str] = ..., mime: _Optional[str] = ..., size: _Optional[int] = ..., width: _Optional[int] = ..., height: _Optional[int] = ..., duration_ms: _Optional[int] = ..., sha256: _Optional[bytes] = ..., thumbnail: _Optional[bytes] = ..., owner: _Optional[int] = ..., name: _Optional[str] = ..., signature: _Optional[bytes] = ...) -> None: ...
