"""Web Push: RFC 8030 delivery, VAPID (RFC 8292) and aes128gcm payload encryption
(RFC 8291 over RFC 8188) (docs/decisions/0130).

pywebpush (`WebPusher.encode`: http-ece's aes128gcm to the subscription's keys) encrypts,
and the POST goes over QIM's own aiohttp session (TLS verified against the system's CAs
or `ca_file`, at most `concurrency` connections, no redirects: the endpoint is the
client's text, and pywebpush's own send follows them); py-vapid signs the VAPID JWT (ES256, the
deployment's P-256 key): `aud` is the push service's origin, `exp` twelve hours ahead
(RFC 8292 allows at most 24), `sub` the operator's contact; a token is reused for an
origin for `vapid_reuse_s` seconds (an injectable clock).

The message is the JSON of the QIM fields (badge, badge_version, conversation, silent)
and, for an alert, title and body per the device's content choice, encrypted to the
subscription's p256dh/auth keys; headers TTL (the alert's ttl_s), Topic (the
conversation: a newer message replaces an undelivered older one; at most 32 URL-safe
base64 characters, so a longer id is hashed) and Urgency (high for an alert, normal for
a silent badge update). An endpoint that is not https:// is permanent. Answers: 201/2xx sent; 404/410 permanent (the subscription is
gone); 429 and 5xx retry_after (Retry-After honoured); other 4xx failed (413: the
payload is too large; 400/401/403: a request or VAPID key the service refuses).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import ssl
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

import aiohttp
from py_vapid import Vapid02
from pywebpush import WebPusher, WebPushException

from qim.errors import ConfigError
from qim.notify.providers.base import Notification, Outcome, PushMetrics, PushProvider, by_status

TOPIC_CHARS = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
VAPID_EXP_S = 12 * 3600


@dataclass(frozen=True)
class VapidConfig:
    """`private_key_pem`: the VAPID P-256 private key (PEM); `subject`: a mailto: or
    https: contact the push services may use; `ca_file` ("" = the system's CAs);
    `timeout_s`; `concurrency`; `vapid_reuse_s`: how long one signed token serves an
    origin (seconds, below VAPID_EXP_S)."""

    private_key_pem: str
    subject: str
    ca_file: str = ""
    timeout_s: float = 10.0
    concurrency: int = 64
    vapid_reuse_s: float = 3600.0

    def __post_init__(self) -> None:
        if not self.subject.startswith(("mailto:", "https:")):
            raise ConfigError("the VAPID subject must be a mailto: or https: contact (RFC 8292)")
        if not 0 < self.vapid_reuse_s < VAPID_EXP_S:
            raise ConfigError("vapid_reuse_s must be positive and below twelve hours")


def topic(collapse_id: str) -> str:
    """The Topic header of a conversation (RFC 8030 5.4: 32 URL-safe base64 characters)."""
    if TOPIC_CHARS.match(collapse_id):
        return collapse_id
    digest = hashlib.sha256(collapse_id.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")[:32]


def message(notification: Notification) -> bytes:
    """The cleartext the service worker reads (module doc)."""
    data: dict[str, Any] = notification.app_data()
    if not notification.alert.silent:
        data["title"], data["body"] = notification.shown()
    return json.dumps(data, separators=(",", ":")).encode()


class VapidSigner:
    """The VAPID Authorization header per push-service origin (module doc)."""

    def __init__(self, config: VapidConfig, clock: Callable[[], float] = time.time) -> None:
        try:
            self._vapid = Vapid02.from_pem(config.private_key_pem.encode())
        except (ValueError, TypeError) as exc:
            raise ConfigError("the VAPID private key is not a PEM P-256 key") from exc
        self._config, self._clock = config, clock
        self._cache: dict[str, tuple[float, str]] = {}

    def header(self, endpoint: str) -> str:
        """`vapid t=<jwt>,k=<public key>` for the endpoint's origin."""
        parts = urlsplit(endpoint)
        aud, now = f"{parts.scheme}://{parts.netloc}", self._clock()
        made, value = self._cache.get(aud, (0.0, ""))
        if not value or now - made >= self._config.vapid_reuse_s:
            claims = {"aud": aud, "exp": int(now) + VAPID_EXP_S, "sub": self._config.subject}
            value = self._vapid.sign(claims)["Authorization"]
            self._cache[aud] = (now, value)
        return value


class WebPushProvider(PushProvider):
    """Web Push (module doc). A registration's `subscription` is the PushSubscription JSON."""

    name = "webpush"

    def __init__(self, config: VapidConfig, metrics: Optional[PushMetrics] = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(config.timeout_s, config.concurrency, metrics)
        self.config = config
        self.vapid = VapidSigner(config, clock)
        self._ssl = ssl.create_default_context(cafile=config.ca_file or None)
        self._session: Optional[aiohttp.ClientSession] = None

    async def start(self) -> None:
        """Open the HTTP session (TLS verified; at most `concurrency` connections)."""
        connector = aiohttp.TCPConnector(limit=self.concurrency, ssl=self._ssl)
        self._session = aiohttp.ClientSession(connector=connector)

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _send(self, notification: Notification) -> Outcome:
        assert self._session is not None, "WebPushProvider.start() first"
        subscription = notification.registration.subscription
        endpoint = str((subscription or {}).get("endpoint", ""))
        if not endpoint.startswith("https://"):  # RFC 8030 8: push services are HTTPS only
            return Outcome.permanent("no https subscription endpoint")
        alert = notification.alert
        try:
            encoded = WebPusher(subscription or {}).encode(message(notification), "aes128gcm")
        except (WebPushException, ValueError, TypeError):  # keys missing or malformed: it can never work
            return Outcome.permanent("bad subscription keys")
        headers = {"Authorization": self.vapid.header(endpoint), "Content-Encoding": "aes128gcm",
                   "Content-Type": "application/octet-stream", "TTL": str(alert.ttl_s),
                   "Urgency": "normal" if alert.silent else "high"}
        if alert.collapse_id:
            headers["Topic"] = topic(alert.collapse_id)
        try:
            # our own POST, not pywebpush's send: no redirects (a subscription's endpoint is
            # the client's text: never followed elsewhere), our TLS context and timeout
            async with self._session.post(endpoint, data=encoded["body"], headers=headers, allow_redirects=False,
                                          timeout=aiohttp.ClientTimeout(total=self.timeout_s)) as resp:
                await resp.read()
                status, retry_after = resp.status, resp.headers.get("Retry-After")
        except aiohttp.ClientError as exc:  # refused, closed before an answer
            return Outcome.retry("unreachable", type(exc).__name__)
        common = by_status(status, retry_after)
        if common is not None:
            return common
        if status in (404, 410):
            return Outcome.permanent(f"status {status}")
        return Outcome.failed(f"status {status}")
