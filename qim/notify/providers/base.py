"""One interface for every push provider (docs/decisions/0130).

`PushProvider.send(notification) -> Outcome` makes ONE request to the provider and maps
its answer onto an Outcome; it never raises for what the provider (or the network) did:

- `sent`: the provider accepted the notification;
- `retry_after`: not now (429, 5xx, a timeout, a refused or closed connection, an
  expired provider credential that was dropped for a fresh one). `retry_after_s` is the
  provider's Retry-After in seconds, or None when it gave none;
- `permanent`: the device's token or subscription is dead (APNs 410 / BadDeviceToken,
  FCM UNREGISTERED, Web Push 404/410): the caller removes the registration;
- `failed`: retrying the same request cannot help (a payload or credential the provider
  refuses): the caller counts it and drops this notification, not the registration.

Retries live in the caller (the NotificationService): it owns the queue, the
back-pressure to the log consumer and the once-per-(device, message) record, and a
provider that slept inside `send` would hold a concurrency slot while waiting.
`RetryPolicy.delay` is the rule the caller applies: bounded, jittered, doubling, and
never sooner than the provider's Retry-After.
"""

from __future__ import annotations

import abc
import asyncio
import email.utils
import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, Optional

from prometheus_client import CollectorRegistry

from qim.obs.metrics import LATENCY_BUCKETS, MetricSet

ProviderName = Literal["apns", "fcm", "webpush"]
OutcomeKind = Literal["sent", "retry_after", "permanent", "failed"]
RETRY_REASONS = ("rate_limited", "server_error", "timeout", "unreachable", "credential")
# httpx logs every request's URL at INFO (an APNs URL ends in the device token), hpack,
# h2 and httpcore every header at DEBUG (the bearer JWT): no token or credential in a log
# line (decision 0130 item 8), so these loggers and their children (hpack.hpack, ...)
# make no record below WARNING.
CHATTY_HTTP_LOGGERS = ("httpx", "httpcore", "hpack", "h2")


def quiet_http_libraries() -> None:
    """Raise CHATTY_HTTP_LOGGERS to WARNING (their children inherit it); idempotent."""
    for name in CHATTY_HTTP_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


@dataclass(frozen=True)
class Registration:
    """A device's push registration: `provider`; `token` (an APNs device token in hex or
    an FCM registration token) or `subscription` (a Web Push PushSubscription as JSON:
    {"endpoint": url, "keys": {"p256dh": b64url, "auth": b64url}}); `with_content`: the
    device's choice to carry the title and body in the payload (False: a content-free
    text, `Alert.generic`); `apns_topic`/`apns_sandbox` as the device registered them
    (push.proto PushRegister, decision 0128)."""

    provider: ProviderName
    token: str = ""
    subscription: Optional[Mapping[str, Any]] = None
    with_content: bool = True
    apns_topic: str = ""  # APNs: the app's bundle id the device registered ("" = the provider's topic)
    apns_sandbox: bool = False  # APNs: a development build (APNS_ENVIRONMENT_SANDBOX, push.proto)


@dataclass(frozen=True)
class Alert:
    """What to show: `title`/`body` (used only when the registration allows content),
    `generic` (the content-free text otherwise), `collapse_id` (the conversation id in
    hex: a newer alert of the conversation replaces an older one), `badge` (the user's
    absolute unread total) with `badge_version` (only grows: a device ignores an older
    one), `silent` (a badge-only update: APNs background push, FCM data message, a Web
    Push message the service worker shows nothing for), `ttl_s` (how long the provider
    keeps it for an offline device), `message_id` (the message in hex, "" for a silent
    update: the app and the tests tell alerts apart by it; decision 0135)."""

    badge: int
    badge_version: int
    collapse_id: str = ""
    title: str = ""
    body: str = ""
    generic: str = "New message"
    silent: bool = False
    ttl_s: int = 86400
    message_id: str = ""


@dataclass(frozen=True)
class Notification:
    """One push to one device: its registration and the alert."""

    registration: Registration
    alert: Alert

    def shown(self) -> tuple[str, str]:
        """(title, body) as the device may show them (its content preference)."""
        if self.registration.with_content:
            return self.alert.title, self.alert.body
        return "", self.alert.generic

    def app_data(self) -> dict[str, Any]:
        """The QIM fields every provider's payload carries (strings: FCM data is str->str)."""
        data = {"badge": str(self.alert.badge), "badge_version": str(self.alert.badge_version),
                "conversation": self.alert.collapse_id, "silent": "1" if self.alert.silent else "0"}
        if self.alert.message_id:
            data["message"] = self.alert.message_id
        return data


@dataclass(frozen=True)
class Outcome:
    """A provider's answer (module doc): `kind`, `retry_after_s` (retry_after only:
    the provider's hint in seconds, None without one), `reason` (a short fixed text or
    the provider's reason code: never a token or a body), `retry_reason` (one of
    RETRY_REASONS for retry_after)."""

    kind: OutcomeKind
    reason: str = ""
    retry_after_s: Optional[float] = None
    retry_reason: str = ""

    @staticmethod
    def sent() -> "Outcome":
        """The provider accepted it."""
        return Outcome("sent")

    @staticmethod
    def retry(retry_reason: str, reason: str, retry_after_s: Optional[float] = None) -> "Outcome":
        """Not now: `retry_reason` one of RETRY_REASONS, `retry_after_s` the provider's hint."""
        assert retry_reason in RETRY_REASONS, retry_reason
        return Outcome("retry_after", reason, retry_after_s, retry_reason)

    @staticmethod
    def permanent(reason: str) -> "Outcome":
        """The token or subscription is dead: the caller removes the registration."""
        return Outcome("permanent", reason)

    @staticmethod
    def failed(reason: str) -> "Outcome":
        """The request is refused and a retry cannot help: the notification is dropped."""
        return Outcome("failed", reason)


def parse_retry_after(value: Optional[str], now: Callable[[], float] = time.time) -> Optional[float]:
    """Retry-After (RFC 9110 10.2.3: delay seconds or an HTTP-date) in seconds from now;
    None when absent or unreadable (the caller's backoff decides then)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now())


def by_status(status: int, retry_after: Optional[str]) -> Optional[Outcome]:
    """The outcome every provider gives a status the same way: 2xx sent, 429 rate limited,
    5xx server error (both retry_after with the Retry-After hint); None: the provider's
    own rules decide (4xx)."""
    if 200 <= status < 300:
        return Outcome.sent()
    if status == 429:
        return Outcome.retry("rate_limited", "status 429", parse_retry_after(retry_after))
    if status >= 500:
        return Outcome.retry("server_error", f"status {status}", parse_retry_after(retry_after))
    return None


@dataclass
class RetryPolicy:
    """The caller's retry rule for `retry_after` outcomes: attempt n (1-based) waits a
    full-jitter delay in [start*2^(n-1)/2, start*2^(n-1)] capped at `cap` seconds, and
    never less than the provider's Retry-After (itself capped at `max_retry_after_s`);
    after `attempts` tries the notification is given up as failed ("retries exhausted").
    Seconds throughout."""

    start: float = 0.5
    cap: float = 60.0
    attempts: int = 8
    max_retry_after_s: float = 3600.0
    rand: Callable[[], float] = field(default=random.random)

    def delay(self, outcome: Outcome, attempt: int) -> Optional[float]:
        """Seconds to wait before attempt `attempt + 1`; None: give up (or not retryable)."""
        if outcome.kind != "retry_after" or attempt >= self.attempts:
            return None
        base = min(self.cap, self.start * (2 ** (attempt - 1)))
        jittered = base / 2 + self.rand() * base / 2
        hint = min(outcome.retry_after_s or 0.0, self.max_retry_after_s)
        return max(jittered, hint)


class PushMetrics(MetricSet):
    """qim_push_sends_total{provider, outcome} (sent, retry_after, permanent, failed),
    qim_push_retries_total{provider, reason} (RETRY_REASONS), qim_push_send_seconds{provider}
    (one request), qim_push_credential_refreshes_total{provider} (APNs JWT, FCM OAuth2
    token). No token, id or body is ever a label."""

    def __init__(self, registry: Optional[CollectorRegistry] = None) -> None:
        super().__init__(registry)
        self.sends = self.counter("qim_push_sends", "Push requests by provider and outcome", ["provider", "outcome"])
        self.retries = self.counter("qim_push_retries", "Retryable push outcomes by reason", ["provider", "reason"])
        self.latency = self.histogram("qim_push_send_seconds", "One push request's latency", ["provider"],
                                      LATENCY_BUCKETS)
        self.refreshes = self.counter("qim_push_credential_refreshes", "Provider credentials made anew",
                                      ["provider"])


class PushProvider(abc.ABC):
    """A provider: `start()` in the running loop, `send()` per notification (at most
    `concurrency` requests at once; `timeout_s` bounds one whole request, the wait for a
    slot included), `close()`. Subclasses implement `_send` and may raise
    asyncio.TimeoutError / OSError there: `send` maps them to retry_after outcomes."""

    name: ProviderName

    def __init__(self, timeout_s: float, concurrency: int, metrics: Optional[PushMetrics] = None) -> None:
        if timeout_s <= 0 or concurrency < 1:
            raise ValueError("a push provider needs timeout_s > 0 and concurrency >= 1")
        self.timeout_s, self.concurrency = timeout_s, concurrency
        self.metrics = metrics or PushMetrics()
        self._slots = asyncio.Semaphore(concurrency)
        quiet_http_libraries()

    @abc.abstractmethod
    async def start(self) -> None:
        """Open the HTTP client (in the loop that will send)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Close the HTTP client."""

    async def send(self, notification: Notification) -> Outcome:
        """One request for `notification` (module doc); counted by provider and outcome."""
        if notification.registration.provider != self.name:
            raise ValueError(f"a {notification.registration.provider} registration sent through {self.name}")
        began = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout_s):
                async with self._slots:
                    outcome = await self._send(notification)
        except TimeoutError:
            outcome = Outcome.retry("timeout", f"no answer within {self.timeout_s} s")
        except OSError as exc:  # refused, reset: the type only, never the address or a token
            outcome = Outcome.retry("unreachable", type(exc).__name__)
        self.metrics.latency.labels(self.name).observe(time.monotonic() - began)
        self.metrics.sends.labels(self.name, outcome.kind).inc()
        if outcome.kind == "retry_after":
            self.metrics.retries.labels(self.name, outcome.retry_reason).inc()
        return outcome

    @abc.abstractmethod
    async def _send(self, notification: Notification) -> Outcome:
        """The provider's request and the mapping of its answer."""
