"""A local FCM HTTP v1 endpoint with its OAuth2 token endpoint (Google's JWT-bearer grant).

POST /token: `grant_type` must be the JWT-bearer grant and `assertion` an RS256 JWT that
verifies with the service account's public key, with `iss` the account's client_email,
`aud` this token URI and the firebase.messaging scope; answered with a fresh random
access token valid `expires_in` seconds (400 invalid_grant otherwise). Every exchange is
counted in `exchanges`.
POST /v1/projects/<project>/messages:send: the bearer must be an access token this
endpoint issued (401 UNAUTHENTICATED otherwise); the body's `message` must have a token
and a notification or data; accepted requests are recorded in `received` and answered by
`mode` ("400": INVALID_ARGUMENT on message.token, "400payload": INVALID_ARGUMENT on another
field, "410": a 404 UNREGISTERED, as FCM says it)."""

from __future__ import annotations

import secrets
import ssl
import time
from typing import Any, Callable

import jwt
from aiohttp import web

from qim.notify.providers.fcm import GRANT, SCOPE
from tests.notify.fakes.http1 import HttpsFake


def _error(status: int, code: str, message: str, details: list[dict[str, Any]]) -> web.Response:
    return web.json_response({"error": {"code": status, "message": message, "status": code, "details": details}},
                             status=status)


class FakeFcm(HttpsFake):
    """The endpoint (module doc): `token_uri` once started; `received` (message objects with
    the bearer used, "_bearer", and the monotonic time it came, "_at"), `accepted` (those
    answered "ok"), `modes` (a device token -> its own mode), `exchanges`, `rejected` (reasons), `expires_in` (seconds); `clock`
    (unix seconds) judges assertions and access tokens."""

    def __init__(self, ssl_context: ssl.SSLContext, project: str, client_email: str, public_key_pem: str) -> None:
        super().__init__(ssl_context)
        self.project, self.client_email, self.public_key_pem = project, client_email, public_key_pem
        self.expires_in = 3600
        self.clock: Callable[[], float] = time.time
        self.issued: dict[str, float] = {}  # access token -> expiry (unix seconds)
        self.exchanges = 0
        self.received: list[dict[str, Any]] = []
        self.rejected: list[str] = []

    @property
    def token_uri(self) -> str:
        return f"{self.base_url}/token"

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/token", self._token)
        app.router.add_post("/v1/projects/{project}/messages:send", self._send)

    async def _token(self, request: web.Request) -> web.Response:
        form = await request.post()
        try:
            if form.get("grant_type") != GRANT:
                raise jwt.InvalidTokenError("grant_type")
            claims = jwt.decode(str(form.get("assertion", "")), self.public_key_pem, algorithms=["RS256"],
                                audience=self.token_uri, issuer=self.client_email,
                                options={"require": ["iat", "exp", "scope"], "verify_exp": False, "verify_iat": False})
            if not claims["iat"] - 60 <= self.clock() < claims["exp"]:
                raise jwt.InvalidTokenError("assertion not valid now")
            if claims["scope"] != SCOPE:
                raise jwt.InvalidTokenError("scope")
        except jwt.PyJWTError as exc:
            self.rejected.append(f"assertion: {exc}")
            return web.json_response({"error": "invalid_grant"}, status=400)
        self.exchanges += 1
        token = secrets.token_urlsafe(24)
        self.issued[token] = self.clock() + self.expires_in
        return web.json_response({"access_token": token, "expires_in": self.expires_in, "token_type": "Bearer"})

    async def _send(self, request: web.Request) -> web.StreamResponse:
        bearer = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if self.issued.get(bearer, 0.0) <= self.clock():  # unknown or expired
            self.rejected.append("bearer")
            return _error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.", [])
        if request.match_info["project"] != self.project:
            self.rejected.append("project")
            return _error(403, "PERMISSION_DENIED", "wrong project", [])
        body = await request.json()
        msg = body.get("message", {})
        if not msg.get("token") or not (msg.get("notification") or msg.get("data")):
            self.rejected.append("message")
            return _error(400, "INVALID_ARGUMENT", "bad message", [])
        entry = {**msg, "_bearer": bearer, "_at": time.monotonic()}
        self.received.append(entry)
        bad_token = [{"@type": "type.googleapis.com/google.rpc.BadRequest",
                      "fieldViolations": [{"field": "message.token", "description": "Invalid registration token"}]}]
        unregistered = [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "UNREGISTERED"}]
        ok = web.json_response({"name": f"projects/{self.project}/messages/{len(self.received)}"})
        return await self.by_mode(request, ok, {
            "400": _error(400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token",
                          bad_token),
            "410": _error(404, "NOT_FOUND", "Requested entity was not found.", unregistered),
            "400payload": _error(400, "INVALID_ARGUMENT", "Invalid value at 'message.android.ttl'", [
                {"@type": "type.googleapis.com/google.rpc.BadRequest",
                 "fieldViolations": [{"field": "message.android.ttl", "description": "Invalid value"}]}]),
        }, msg["token"], entry)
