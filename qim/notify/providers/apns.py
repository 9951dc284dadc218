"""APNs over HTTP/2 with token authentication (docs/decisions/0130; Apple's "Sending
notification requests to APNs" and "Establishing a token-based connection").

The client is httpx's HTTP/2 client (`httpx[http2]`, the `push` extra): one connection,
many streams, TLS verified against the system's CAs or `ca_file`. aioapns was the first
choice, but it pins the host and port to Apple's and needs pyOpenSSL, so it could not be
pointed at the tests' local endpoint.

The provider token is a JWT (ES256, PyJWT) with the team id as `iss`, the key id as
`kid` and `iat`; Apple refuses a token older than 60 minutes and one made anew more
often than every 20, so `ApnsToken` makes a new one after `refresh_s` (50 minutes by
default), measured on an injectable clock. A 403 ExpiredProviderToken /
InvalidProviderToken drops the cached token and answers retry_after (the next try signs
anew).

Request: POST /3/device/<token> with apns-topic, apns-push-type (alert, or background
for a silent badge update), apns-priority (10 alert, 5 background: Apple requires 5),
apns-collapse-id (the conversation), apns-expiration (now + ttl). Payload: aps.alert
{title, body}, aps.badge, aps.sound for an alert; aps.content-available=1 and aps.badge
for a silent one; the QIM fields under "qim" (badge_version, conversation).
Answers: 200 sent; 410 Unregistered and 400 BadDeviceToken / DeviceTokenNotForTopic
permanent; 429 and 5xx retry_after (Retry-After honoured); other 4xx failed (reason).
"""

from __future__ import annotations

import json
import ssl
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from qim.errors import ConfigError
from qim.notify.providers.base import Notification, Outcome, PushMetrics, PushProvider, by_status

PRODUCTION = "https://api.push.apple.com"
SANDBOX = "https://api.sandbox.push.apple.com"
TOKEN_MAX_AGE_S = 3600  # Apple: a provider token older than one hour is refused
PERMANENT_400 = frozenset({"BadDeviceToken", "DeviceTokenNotForTopic"})
CREDENTIAL_403 = frozenset({"ExpiredProviderToken", "InvalidProviderToken"})


@dataclass(frozen=True)
class ApnsConfig:
    """`team_id`, `key_id` and `key_pem` (the .p8 signing key, PEM) of the provider
    token; `topic` (the app's bundle id, for a registration that names none); `base_url`
    (PRODUCTION or a test endpoint) and `sandbox_url` (SANDBOX: a registration of a
    development build goes there); `ca_file` ("" = the system's CAs); `timeout_s` (one request, seconds);
    `concurrency` (requests at once); `refresh_s` (a token's life here, seconds:
    1200 < refresh_s < 3600)."""

    team_id: str
    key_id: str
    key_pem: str
    topic: str
    base_url: str = PRODUCTION
    sandbox_url: str = SANDBOX
    ca_file: str = ""
    timeout_s: float = 10.0
    concurrency: int = 64
    refresh_s: float = 3000.0

    def __post_init__(self) -> None:
        if not (self.team_id and self.key_id and self.key_pem and self.topic):
            raise ConfigError("APNs needs a team id, a key id, a .p8 key and a topic")
        if not 1200 <= self.refresh_s < TOKEN_MAX_AGE_S:
            raise ConfigError("APNs refresh_s must be in [1200, 3600) seconds (Apple's token rules)")


class ApnsToken:
    """The provider JWT, made anew once `refresh_s` seconds old (`clock`: unix seconds).
    `get()` -> the token; `drop()` forgets it (APNs said it expired)."""

    def __init__(self, config: ApnsConfig, clock: Callable[[], float] = time.time,
                 on_refresh: Optional[Callable[[], None]] = None) -> None:
        self._config, self._clock, self._on_refresh = config, clock, on_refresh
        try:
            key = serialization.load_pem_private_key(config.key_pem.encode(), password=None)
        except ValueError as exc:
            raise ConfigError("the APNs key is not a PEM private key (the .p8 file)") from exc
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ConfigError("the APNs key must be a P-256 (ES256) key, the .p8 file Apple issues")
        self._key = key
        self._token, self._made = "", 0.0

    def get(self) -> str:
        """The current token (signs a new one when none or too old)."""
        now = self._clock()
        if not self._token or now - self._made >= self._config.refresh_s:
            self._token = jwt.encode({"iss": self._config.team_id, "iat": int(now)}, self._key,
                                     algorithm="ES256", headers={"kid": self._config.key_id})
            self._made = now
            if self._on_refresh is not None:
                self._on_refresh()
        return self._token

    def drop(self) -> None:
        """Forget the token: the next `get()` signs a new one."""
        self._token = ""


def payload(notification: Notification) -> dict[str, Any]:
    """The APNs JSON payload of a notification (module doc)."""
    alert = notification.alert
    data = notification.app_data()
    qim = {"badge_version": int(data["badge_version"]), "conversation": data["conversation"]}
    if "message" in data:
        qim["message"] = data["message"]
    if alert.silent:
        return {"aps": {"content-available": 1, "badge": alert.badge}, "qim": qim}
    title, body = notification.shown()
    shown = {"title": title, "body": body} if title else {"body": body}
    return {"aps": {"alert": shown, "badge": alert.badge, "sound": "default"}, "qim": qim}


class ApnsProvider(PushProvider):
    """APNs (module doc). `clock` (unix seconds) signs the tokens and dates apns-expiration."""

    name = "apns"

    def __init__(self, config: ApnsConfig, metrics: Optional[PushMetrics] = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(config.timeout_s, config.concurrency, metrics)
        self.config, self._clock = config, clock
        self.token = ApnsToken(config, clock, lambda: self.metrics.refreshes.labels("apns").inc())
        self._client: Optional[httpx.AsyncClient] = None

    async def start(self) -> None:
        """Open the HTTP/2 client (TLS verified: the system's CAs or `ca_file`)."""
        verify = ssl.create_default_context(cafile=self.config.ca_file or None)
        limits = httpx.Limits(max_connections=4, max_keepalive_connections=4)
        self._client = httpx.AsyncClient(http1=False, http2=True, verify=verify, limits=limits,
                                         timeout=httpx.Timeout(self.config.timeout_s), follow_redirects=False)

    async def close(self) -> None:
        """Close the client's connections."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _send(self, notification: Notification) -> Outcome:
        assert self._client is not None, "ApnsProvider.start() first"
        alert = notification.alert
        headers = {
            "authorization": f"bearer {self.token.get()}",
            "apns-topic": notification.registration.apns_topic or self.config.topic,
            "apns-push-type": "background" if alert.silent else "alert",
            "apns-priority": "5" if alert.silent else "10",
            "apns-expiration": str(int(self._clock()) + alert.ttl_s),
        }
        if alert.collapse_id:
            headers["apns-collapse-id"] = alert.collapse_id[:64]  # Apple's limit: 64 bytes
        base = self.config.sandbox_url if notification.registration.apns_sandbox else self.config.base_url
        url = f"{base}/3/device/{notification.registration.token}"
        try:
            resp = await self._client.post(url, content=json.dumps(payload(notification)).encode(), headers=headers)
        except httpx.TimeoutException:
            return Outcome.retry("timeout", f"no answer within {self.timeout_s} s")
        except httpx.TransportError as exc:  # refused, closed, a broken HTTP/2 stream
            return Outcome.retry("unreachable", type(exc).__name__)
        return self._answer(resp)

    def _answer(self, resp: httpx.Response) -> Outcome:
        common = by_status(resp.status_code, resp.headers.get("retry-after"))
        if common is not None:
            return common
        try:
            reason = str(json.loads(resp.content).get("reason", ""))[:64]
        except (ValueError, AttributeError):
            reason = ""
        if resp.status_code == 410 or (resp.status_code == 400 and reason in PERMANENT_400):
            return Outcome.permanent(reason or f"status {resp.status_code}")
        if resp.status_code == 403 and reason in CREDENTIAL_403:
            self.token.drop()
            return Outcome.retry("credential", reason)
        return Outcome.failed(f"status {resp.status_code} {reason}".strip())
