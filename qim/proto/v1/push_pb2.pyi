from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PushProvider(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PUSH_PROVIDER_UNSPECIFIED: _ClassVar[PushProvider]
    PUSH_PROVIDER_APNS: _ClassVar[PushProvider]
    PUSH_PROVIDER_FCM: _ClassVar[PushProvider]
    PUSH_PROVIDER_WEBPUSH: _ClassVar[PushProvider]

class ApnsEnvironment(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    APNS_ENVIRONMENT_UNSPECIFIED: _ClassVar[ApnsEnvironment]
    APNS_ENVIRONMENT_SANDBOX: _ClassVar[ApnsEnvironment]
    APNS_ENVIRONMENT_PRODUCTION: _ClassVar[ApnsEnvironment]
PUSH_PROVIDER_UNSPECIFIED: PushProvider
PUSH_PROVIDER_APNS: PushProvider
PUSH_PROVIDER_FCM: PushProvider
PUSH_PROVIDER_WEBPUSH: PushProvider
APNS_ENVIRONMENT_UNSPECIFIED: ApnsEnvironment
APNS_ENVIRONMENT_SANDBOX: ApnsEnvironment
APNS_ENVIRONMENT_PRODUCTION: ApnsEnvironment

class PushRegister(_message.Message):
    __slots__ = ("provider", "token", "apns_topic", "apns_environment", "webpush_p256dh", "webpush_auth", "content", "locale")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    APNS_TOPIC_FIELD_NUMBER: _ClassVar[int]
    APNS_ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    WEBPUSH_P256DH_FIELD_NUMBER: _ClassVar[int]
    WEBPUSH_AUTH_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    LOCALE_FIELD_NUMBER: _ClassVar[int]
    provider: PushProvider
    token: str
    apns_topic: str
    apns_environment: ApnsEnvironment
    webpush_p256dh: str
    webpush_auth: str
    content: bool
    locale: str
    def __init__(self, provider: _Optional[_Union[PushProvider, str, int]] = ..., token: _Optional[str] = ..., apns_topic: _Optional[str] = ..., apns_environment: _Optional[_Union[ApnsEnvironment, str, int]] = ..., webpush_p256dh: _Optional[str] = ..., webpush_auth: _Optional[str] = ..., content: _Optional[bool] = ..., locale: _Optional[str] = ...) -> None: ...

class PushRegistration(_message.Message):
    __slots__ = ("device_id", "settings", "registered_at_ms", "token_iat")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_IAT_FIELD_NUMBER: _ClassVar[int]
    device_id: int
    settings: PushRegister
    registered_at_ms: int
    token_iat: int
    def __init__(self, device_id: _Optional[int] = ..., settings: _Optional[_Union[PushRegister, _Mapping]] = ..., registered_at_ms: _Optional[int] = ..., token_iat: _Optional[int] = ...) -> None: ...

class PushRegisterOk(_message.Message):
    __slots__ = ("registration", "version")
    REGISTRATION_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    registration: PushRegistration
    version: int
    def __init__(self, registration: _Optional[_Union[PushRegistration, _Mapping]] = ..., version: _Optional[int] = ...) -> None: ...

class PushUnregister(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PushUnregisterOk(_message.Message):
    __slots__ = ("removed", "version")
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    removed: bool
    version: int
    def __init__(self, removed: _Optional[bool] = ..., version: _Optional[int] = ...) -> None: ...

class PushList(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PushListOk(_message.Message):
    __slots__ = ("registrations", "version")
    REGISTRATIONS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    registrations: _containers.RepeatedCompositeFieldContainer[PushRegistration]
    version: int
    def __init__(self, registrations: _Optional[_Iterable[_Union[PushRegistration, _Mapping]]] = ..., version: _Optional[int] = ...) -> None: ...
