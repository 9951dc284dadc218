"""Device push registrations in the SDK: `client.push` (docs/sdk.md "Push
registrations"; docs/decisions/0128-device-push-registrations.md).

`register` tells the server where offline notifications for this device go (APNs,
FCM or a browser's Web Push subscription) and the device's preferences; registering
again replaces it, it survives reconnects; `unregister` removes it (call it at logout:
QIM has no logout frame); `list` is the user's registrations for a settings screen.
A registration is checked here by the server's own rules (qim/wire/push.py) before
anything is sent: PushInvalid (INVALID_ARGUMENT) names the rule; the server's refusals
are ServerError; UNAVAILABLE (the user's session shard moving) is retried with bounded
jittered backoff within the runtime's retry budget.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Optional

from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import push_pb2
from qim.protocol import Opcode
from qim.sdk.retry import Backoff, with_retry
from qim.wire.push import PROVIDERS, check_register

ENVIRONMENTS = {"sandbox": push_pb2.APNS_ENVIRONMENT_SANDBOX, "production": push_pb2.APNS_ENVIRONMENT_PRODUCTION}


class PushInvalid(RequestError):
    """A registration the server would refuse (INVALID_ARGUMENT); nothing was sent.
    `message` names the rule (qim/wire/push.py)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_ARGUMENT, message)


@dataclass(frozen=True)
class PushRegistration:
    """One device's registration as the server keeps it: `provider` ("apns", "fcm",
    "webpush"), `token` (APNs device token hex, FCM registration token, or the Web Push
    endpoint), the provider's fields (empty when not its own), `content` (message text
    in the payload), `locale` ("" none), `registered_at_ms` (ms since the epoch)."""

    device_id: int
    provider: str
    token: str
    content: bool
    locale: str
    apns_topic: str = ""
    apns_environment: str = ""
    webpush_p256dh: str = ""
    webpush_auth: str = ""
    registered_at_ms: int = 0


def _registration(r: push_pb2.PushRegistration) -> PushRegistration:
    s = r.settings
    provider = {v: k for k, v in PROVIDERS.items()}.get(s.provider, str(s.provider))
    env = {v: k for k, v in ENVIRONMENTS.items()}.get(s.apns_environment, "")
    return PushRegistration(r.device_id, provider, s.token, s.content, s.locale, s.apns_topic, env,
                            s.webpush_p256dh, s.webpush_auth, r.registered_at_ms)


class Push:
    """The push registration calls of one runtime (module doc)."""

    def __init__(self, runtime: Any) -> None:
        self._rt = runtime  # a ClientRuntime: request and retry_budget_s
        self.version = 0  # the user's registration version last answered (only grows)

    async def _request(self, opcode: int, body: bytes) -> bytes:
        _, reply = await with_retry(functools.partial(self._rt.request, opcode, body),
                                    Backoff(budget=self._rt.retry_budget_s))
        return reply

    def _saw(self, version: int) -> None:
        self.version = max(self.version, version)

    async def register(self, provider: str, token: str, content: bool = True, locale: Optional[str] = None, *,
                       apns_topic: str = "", apns_environment: str = "", webpush_p256dh: str = "",
                       webpush_auth: str = "") -> PushRegistration:
        """PUSH_REGISTER for this device (replacing its registration). `provider`
        "apns" (token: device token hex; apns_topic, apns_environment "sandbox" or
        "production"), "fcm" (token: registration token) or "webpush" (token: the
        PushSubscription endpoint; webpush_p256dh and webpush_auth: its keys, base64url).
        PushInvalid before sending; ServerError; NotConnected."""
        if provider not in PROVIDERS:
            raise PushInvalid("provider: one of apns, fcm, webpush")
        if apns_environment and apns_environment not in ENVIRONMENTS:
            raise PushInvalid("apns_environment: sandbox or production")
        req = push_pb2.PushRegister(provider=PROVIDERS[provider], token=token, content=bool(content),
                                    locale=locale or "", apns_topic=apns_topic,
                                    apns_environment=ENVIRONMENTS.get(apns_environment, 0),
                                    webpush_p256dh=webpush_p256dh, webpush_auth=webpush_auth)
        try:
            check_register(req)
        except RequestError as exc:
            raise PushInvalid(exc.message) from None
        ok = push_pb2.PushRegisterOk.FromString(await self._request(Opcode.PUSH_REGISTER, req.SerializeToString()))
        self._saw(ok.version)
        return _registration(ok.registration)

    async def unregister(self) -> bool:
        """PUSH_UNREGISTER: remove this device's registration (whether there was one)."""
        ok = push_pb2.PushUnregisterOk.FromString(await self._request(Opcode.PUSH_UNREGISTER, b""))
        self._saw(ok.version)
        return ok.removed

    async def list(self) -> list[PushRegistration]:
        """PUSH_LIST: the user's live registrations, every device, by device_id."""
        ok = push_pb2.PushListOk.FromString(await self._request(Opcode.PUSH_LIST, b""))
        self._saw(ok.version)
        return [_registration(r) for r in ok.registrations]
