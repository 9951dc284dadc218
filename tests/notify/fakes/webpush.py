"""A local RFC 8030 push service. `subscribe(server_key)` makes a subscription as a browser
would (a P-256 key pair and a 16-byte auth secret, kept here; the VAPID public key it was
made for) and returns its PushSubscription JSON. POST /push/<id> checks, as a push
service does: `Authorization: vapid t=<jwt>,k=<key>` (RFC 8292) whose key is the one the
subscription was made with and whose JWT verifies (ES256) with `aud` this origin, an
`exp` within 24 hours and a `sub`; a TTL header; Content-Encoding aes128gcm. It then
DECRYPTS the body with the subscription's private key and auth secret (RFC 8291, http-ece)
and records the cleartext JSON with the TTL, Topic and Urgency headers in `received`
(201 Created in mode "ok"; "400" a 400, "410" a 410 Gone, "307" a redirect to /elsewhere,
which counts the clients that follow it in `followed`). An unknown subscription is 404,
a check that fails 400/401/403, each counted in `rejected`."""

from __future__ import annotations

import base64
import json
import os
import ssl
import time
from typing import Any

import http_ece
import jwt
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.notify.fakes.http1 import HttpsFake


def b64url(raw: bytes) -> str:
    """Unpadded URL-safe base64 (the Web Push key encoding)."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def unb64url(text: str) -> bytes:
    """The inverse of b64url."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def raw_public(key: ec.EllipticCurvePrivateKey) -> bytes:
    """The uncompressed P-256 point of a key pair (65 bytes)."""
    return key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)


class FakePushService(HttpsFake):
    """The push service (module doc): `received` (each with its monotonic time, "at"),
    `accepted` (those answered "ok"), `modes` (a subscription id -> its own mode),
    `rejected` (reasons)."""

    def __init__(self, ssl_context: ssl.SSLContext) -> None:
        super().__init__(ssl_context)
        self.subs: dict[str, tuple[ec.EllipticCurvePrivateKey, bytes, bytes]] = {}
        self.received: list[dict[str, Any]] = []
        self.rejected: list[str] = []
        self.followed = 0

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/push/{sub}", self._push)
        app.router.add_route("*", "/elsewhere", self._elsewhere)

    def subscribe(self, server_key: bytes) -> dict[str, Any]:
        """A new subscription for the VAPID public key `server_key` (65 raw bytes)."""
        key, auth, sub_id = ec.generate_private_key(ec.SECP256R1()), os.urandom(16), b64url(os.urandom(9))
        self.subs[sub_id] = (key, auth, server_key)
        return {"endpoint": f"{self.base_url}/push/{sub_id}",
                "keys": {"p256dh": b64url(raw_public(key)), "auth": b64url(auth)}}

    def _reject(self, status: int, reason: str) -> web.Response:
        self.rejected.append(reason)
        return web.Response(status=status, text=reason)

    async def _push(self, request: web.Request) -> web.StreamResponse:
        sub = self.subs.get(request.match_info["sub"])
        if sub is None:
            return self._reject(404, "no such subscription")
        key, auth, server_key = sub
        scheme, _, params = request.headers.get("Authorization", "").partition(" ")
        fields = dict(p.strip().split("=", 1) for p in params.split(",") if "=" in p)
        if scheme != "vapid" or "t" not in fields or "k" not in fields:
            return self._reject(401, "no VAPID authorization")
        if unb64url(fields["k"]) != server_key:
            return self._reject(403, "VAPID key is not the subscription's")
        pem = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), server_key).public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        try:
            claims = jwt.decode(fields["t"], pem, algorithms=["ES256"], audience=self.base_url,
                                options={"require": ["exp", "sub", "aud"]})
        except jwt.PyJWTError as exc:
            return self._reject(403, f"VAPID token: {exc}")
        if claims["exp"] > time.time() + 86400:
            return self._reject(403, "VAPID exp more than 24 h ahead")
        if not request.headers.get("TTL", "").isdigit():
            return self._reject(400, "no TTL")
        if request.headers.get("Content-Encoding") != "aes128gcm":
            return self._reject(400, "not aes128gcm")
        try:
            clear = http_ece.decrypt(await request.read(), private_key=key, auth_secret=auth, version="aes128gcm")
        except Exception as exc:  # http-ece raises several types for a bad record
            return self._reject(400, f"decrypt: {type(exc).__name__}")
        entry = {"sub": request.match_info["sub"], "ttl": request.headers["TTL"],
                 "topic": request.headers.get("Topic"), "urgency": request.headers.get("Urgency"),
                 "sub_claim": claims["sub"], "payload": json.loads(clear), "at": time.monotonic()}
        self.received.append(entry)
        return await self.by_mode(request, web.Response(status=201), {
            "400": web.Response(status=400, text="bad request"),
            "410": web.Response(status=410, text="gone"),
            "307": web.Response(status=307, headers={"Location": f"{self.base_url}/elsewhere"}),
        }, entry["sub"], entry)

    async def _elsewhere(self, request: web.Request) -> web.Response:
        """Where mode "307" redirects: a client that follows it is counted in `followed`."""
        self.followed += 1
        return web.Response(status=201)
