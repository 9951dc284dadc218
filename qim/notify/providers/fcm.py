"""FCM HTTP v1 (docs/decisions/0130; Firebase's "Send a message using FCM HTTP v1 API"
and Google's "Using OAuth 2.0 for Server to Server Applications").

Credentials: a service account's JSON (project_id, client_email, private_key, token_uri).
`FcmToken` signs an RS256 assertion (PyJWT: iss = client_email, scope firebase.messaging,
aud = token_uri, one hour), exchanges it at token_uri (the JWT-bearer grant, RFC 7523)
for an access token and keeps that until `margin_s` before its expiry (an injectable
clock decides). google-auth does the same but only synchronously (its asyncio transport
is a private module), so this is PyJWT and aiohttp, the HTTP client QIM already runs.

Request: POST {base_url}/v1/projects/{project}/messages:send, `Authorization: Bearer`,
{"message": {"token", "android": {"collapse_key", "priority", "ttl"}, "notification":
{title, body} (an alert only), "data": the QIM fields (badge, badge_version,
conversation, silent)}}: a silent badge update is a data-only message.
Answers: 200 sent; 404 (UNREGISTERED), 403 SENDER_ID_MISMATCH and a 400 INVALID_ARGUMENT
about the token (a field violation on message.token) permanent; 401 drops the access
token and answers retry_after; 429 and 5xx retry_after (Retry-After honoured); other 4xx
failed. A token endpoint that fails is retry_after ("credential").
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

import aiohttp
import jwt

from qim.errors import ConfigError
from qim.notify.providers.base import Notification, Outcome, PushMetrics, PushProvider, by_status

ENDPOINT = "https://fcm.googleapis.com"
SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ASSERTION_LIFE_S = 3600  # Google's longest


@dataclass(frozen=True)
class FcmConfig:
    """`service_account`: the parsed service-account JSON; `base_url` (ENDPOINT or a test
    endpoint); `ca_file` ("" = the system's CAs; also used for token_uri); `timeout_s`;
    `concurrency`; `margin_s`: an access token is replaced this many seconds before it
    expires."""

    service_account: Mapping[str, Any]
    base_url: str = ENDPOINT
    ca_file: str = ""
    timeout_s: float = 10.0
    concurrency: int = 64
    margin_s: float = 300.0

    def __post_init__(self) -> None:
        missing = [k for k in ("project_id", "client_email", "private_key", "token_uri")
                   if not self.service_account.get(k)]
        if missing:
            raise ConfigError(f"the FCM service account lacks {', '.join(missing)}")

    @property
    def project(self) -> str:
        """The Firebase project id (the service account's project_id)."""
        return str(self.service_account["project_id"])


def load_service_account(path: str) -> dict[str, Any]:
    """The service-account JSON file Firebase's console gives (ConfigError naming the path
    and the first problem: unreadable, not JSON, not a service account)."""
    try:
        with open(path, encoding="utf-8") as fh:
            account = json.load(fh)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"FCM service account {path}: {type(exc).__name__}") from exc
    if not isinstance(account, dict) or account.get("type") != "service_account":
        raise ConfigError(f"FCM service account {path}: not a service_account JSON")
    return account


class CredentialError(Exception):
    """The token endpoint did not give an access token (the status or the failure type)."""


class FcmToken:
    """The OAuth2 access token of the service account (module doc); `clock` unix seconds."""

    def __init__(self, config: FcmConfig, clock: Callable[[], float] = time.time,
                 on_refresh: Optional[Callable[[], None]] = None) -> None:
        self._config, self._clock, self._on_refresh = config, clock, on_refresh
        self._token, self._expires = "", 0.0
        self._lock = asyncio.Lock()

    def assertion(self) -> str:
        """The signed RS256 JWT asserted at token_uri."""
        sa, now = self._config.service_account, int(self._clock())
        claims = {"iss": sa["client_email"], "scope": SCOPE, "aud": sa["token_uri"], "iat": now,
                  "exp": now + ASSERTION_LIFE_S}
        headers = {"kid": sa["private_key_id"]} if sa.get("private_key_id") else None
        return jwt.encode(claims, sa["private_key"], algorithm="RS256", headers=headers)

    async def get(self, session: aiohttp.ClientSession, ssl_ctx: ssl.SSLContext) -> str:
        """The cached access token, or a new one once within `margin_s` of its expiry;
        raises CredentialError when the token endpoint fails."""
        async with self._lock:  # one exchange at a time: concurrent sends share it
            if self._token and self._clock() < self._expires - self._config.margin_s:
                return self._token
            uri = str(self._config.service_account["token_uri"])
            try:
                async with session.post(uri, data={"grant_type": GRANT, "assertion": self.assertion()},
                                        ssl=ssl_ctx if uri.startswith("https://") else True,
                                        allow_redirects=False) as resp:
                    body = await resp.read()
                    if resp.status != 200:
                        raise CredentialError(f"token endpoint status {resp.status}")
            except (aiohttp.ClientError, OSError) as exc:
                raise CredentialError(f"token endpoint {type(exc).__name__}") from exc
            try:
                answer = json.loads(body)
                token, life = str(answer["access_token"]), float(answer.get("expires_in", 3600))
            except (ValueError, KeyError, TypeError) as exc:
                raise CredentialError("token endpoint answer without access_token") from exc
            self._token, self._expires = token, self._clock() + life
            if self._on_refresh is not None:
                self._on_refresh()
            return token

    def drop(self) -> None:
        """Forget the access token (FCM answered 401)."""
        self._token = ""


def message(notification: Notification) -> dict[str, Any]:
    """The v1 `message` object of a notification (module doc)."""
    alert = notification.alert
    android: dict[str, Any] = {"priority": "normal" if alert.silent else "high", "ttl": f"{alert.ttl_s}s"}
    if alert.collapse_id:
        android["collapse_key"] = alert.collapse_id
    msg: dict[str, Any] = {"token": notification.registration.token, "android": android,
                           "data": notification.app_data()}
    if not alert.silent:
        title, body = notification.shown()
        msg["notification"] = {"title": title, "body": body} if title else {"body": body}
    return msg


def _token_violation(answer: Any) -> bool:
    """A 400 INVALID_ARGUMENT about the registration token (not about the payload)."""
    error = answer.get("error", {}) if isinstance(answer, dict) else {}
    for detail in error.get("details", []) or []:
        for violation in detail.get("fieldViolations", []) or []:
            if violation.get("field") == "message.token":
                return True
    return "registration token" in str(error.get("message", "")).lower()


class FcmProvider(PushProvider):
    """FCM HTTP v1 (module doc)."""

    name = "fcm"

    def __init__(self, config: FcmConfig, metrics: Optional[PushMetrics] = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(config.timeout_s, config.concurrency, metrics)
        self.config = config
        self.token = FcmToken(config, clock, lambda: self.metrics.refreshes.labels("fcm").inc())
        self._ssl = ssl.create_default_context(cafile=config.ca_file or None)
        self._session: Optional[aiohttp.ClientSession] = None

    async def start(self) -> None:
        """Open the HTTP session (TLS verified; at most `concurrency` connections)."""
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=self.concurrency))

    async def close(self) -> None:
        """Close the HTTP session."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _send(self, notification: Notification) -> Outcome:
        assert self._session is not None, "FcmProvider.start() first"
        try:
            bearer = await self.token.get(self._session, self._ssl)
        except CredentialError as exc:
            return Outcome.retry("credential", str(exc))
        url = f"{self.config.base_url}/v1/projects/{self.config.project}/messages:send"
        try:
            async with self._session.post(url, json={"message": message(notification)},
                                          headers={"Authorization": f"Bearer {bearer}"},
                                          ssl=self._ssl if url.startswith("https://") else True,
                                          allow_redirects=False) as resp:
                body = await resp.read()
                status, retry_after = resp.status, resp.headers.get("Retry-After")
        except aiohttp.ClientError as exc:  # refused, closed before an answer
            return Outcome.retry("unreachable", type(exc).__name__)
        common = by_status(status, retry_after)
        if common is not None:
            return common
        try:
            answer = json.loads(body)
        except ValueError:
            answer = {}
        code = str(answer.get("error", {}).get("status", "")) if isinstance(answer, dict) else ""
        if status == 404 or (status == 403 and "SENDER_ID_MISMATCH" in body.decode("utf-8", "replace")) or (
            status == 400 and _token_violation(answer)
        ):
            return Outcome.permanent(code or f"status {status}")
        if status == 401:
            self.token.drop()
            return Outcome.retry("credential", "status 401")
        return Outcome.failed(f"status {status} {code}".strip())
