"""A local APNs endpoint: HTTP/2 over TLS (ALPN h2) with the `h2` state machine on an
asyncio server (aiohttp's server speaks HTTP/1.1 only). Every request is checked as APNs
would: POST /3/device/<token>, a bearer JWT that verifies (ES256) with the provider's
public key with the expected `kid` and `iss` and an `iat` less than an hour old, the
expected apns-topic, an apns-push-type of alert or background, a JSON payload with an
`aps` object. A request that fails a check is answered 403 (InvalidProviderToken) or 400
(BadTopic, BadPayload...) and counted in `rejected`; one that passes is recorded in
`received` and answered by `mode` (tests/notify/fakes/__init__.py; here also "403", an
ExpiredProviderToken, and "413", PayloadTooLarge)."""

from __future__ import annotations

import asyncio
import json
import random
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import jwt
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import ConnectionTerminated, DataReceived, RequestReceived, StreamEnded, StreamReset


@dataclass
class ApnsRequest:
    """One accepted request: the device token, the headers (lower-case names), the
    verified JWT claims and header, the decoded payload."""

    token: str
    headers: dict[str, str]
    claims: dict[str, Any]
    jwt_header: dict[str, Any]
    payload: dict[str, Any]


@dataclass
class FakeApns:
    """The endpoint (module doc): `base_url` once started; `mode`, `retry_after`, `modes`
    (a device token's own mode), `slow` (a device token's answers wait that long);
    `received`, `rejected` (reasons), `jwts` (every distinct provider token seen); `clock`
    (unix seconds) judges a token's age."""

    public_key_pem: str
    key_id: str
    team_id: str
    topic: str
    ssl_context: ssl.SSLContext
    clock: Callable[[], float] = time.time
    mode: str = "ok"
    retry_after: str = "7"
    delay_s: float = 0.0  # > 0: each answer waits a random 0..delay_s seconds (requests in flight)
    slow: dict[str, float] = field(default_factory=dict)  # device token -> seconds its answers wait
    modes: dict[str, str] = field(default_factory=dict)  # device token -> its own mode (over `mode`)
    received: list[ApnsRequest] = field(default_factory=list)
    accepted: list[ApnsRequest] = field(default_factory=list)  # answered 200 on a connection still open
    rejected: list[str] = field(default_factory=list)
    jwts: list[str] = field(default_factory=list)
    base_url: str = ""
    _server: Optional[asyncio.AbstractServer] = None
    _conns: list[asyncio.Transport] = field(default_factory=list)

    async def start(self) -> "FakeApns":
        """Listen on a free loopback port."""
        self.ssl_context.set_alpn_protocols(["h2"])
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _H2Protocol(self), "127.0.0.1", 0, ssl=self.ssl_context)
        self.base_url = f"https://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def stop(self) -> None:
        """Stop listening and drop every connection."""
        if self._server is not None:
            self._server.close()
            for conn in self._conns:  # Python 3.11 has no Server.close_clients()
                conn.abort()
            await self._server.wait_closed()

    def check(self, headers: dict[str, str], body: bytes) -> tuple[int, str, Optional[ApnsRequest]]:
        """(status, APNs reason, the request when accepted) by APNs' rules (module doc)."""
        path = headers.get(":path", "")
        if headers.get(":method") != "POST" or not path.startswith("/3/device/"):
            return 405, "MethodNotAllowed", None
        auth = headers.get("authorization", "")
        if not auth.startswith("bearer "):
            return 403, "MissingProviderToken", None
        token = auth[len("bearer "):]
        try:
            jwt_header = jwt.get_unverified_header(token)
            claims = jwt.decode(token, self.public_key_pem, algorithms=["ES256"], issuer=self.team_id,
                                options={"require": ["iss", "iat"], "verify_iat": False})
        except jwt.PyJWTError:
            return 403, "InvalidProviderToken", None
        if jwt_header.get("kid") != self.key_id:
            return 403, "InvalidProviderToken", None
        if not -60 <= self.clock() - claims["iat"] < 3600:  # APNs: at most an hour old
            return 403, "ExpiredProviderToken", None
        if headers.get("apns-topic") != self.topic:
            return 400, "BadTopic", None
        if headers.get("apns-push-type") not in ("alert", "background"):
            return 400, "InvalidPushType", None
        try:
            payload = json.loads(body)
            assert isinstance(payload.get("aps"), dict)
        except (ValueError, AssertionError, AttributeError):
            return 400, "PayloadEmpty", None
        if token not in self.jwts:
            self.jwts.append(token)
        return 200, "", ApnsRequest(path[len("/3/device/"):], headers, claims, jwt_header, payload)


class _H2Protocol(asyncio.Protocol):
    """One client connection: collects each stream's headers and body, answers on its end."""

    def __init__(self, fake: FakeApns) -> None:
        self.fake = fake
        self.conn = H2Connection(H2Configuration(client_side=False, header_encoding="utf-8"))
        self.transport: Optional[asyncio.Transport] = None
        self.streams: dict[int, tuple[dict[str, str], bytearray]] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.fake._conns.append(transport)
        self.conn.initiate_connection()
        transport.write(self.conn.data_to_send())

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        for event in self.conn.receive_data(data):
            if isinstance(event, RequestReceived):
                self.streams[event.stream_id] = ({str(k): str(v) for k, v in event.headers}, bytearray())
            elif isinstance(event, DataReceived):
                self.streams[event.stream_id][1].extend(event.data)
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, StreamEnded):
                self._answer(event.stream_id)
            elif isinstance(event, StreamReset):
                self.streams.pop(event.stream_id, None)
            elif isinstance(event, ConnectionTerminated):
                self.transport.close()
                return
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(self.conn.data_to_send())

    def _answer(self, stream_id: int) -> None:
        assert self.transport is not None
        headers, body = self.streams.pop(stream_id)
        status, reason, request = self.fake.check(headers, bytes(body))
        if request is None:
            self.fake.rejected.append(reason)
        else:
            self.fake.received.append(request)
            mode = self.fake.modes.get(request.token, self.fake.mode)
            if mode == "close":
                self.transport.abort()
                return
            if mode == "hang":  # no answer: the client's timeout decides
                return
            status, reason = {"ok": (200, ""), "400": (400, "BadDeviceToken"), "410": (410, "Unregistered"),
                              "429": (429, "TooManyRequests"), "500": (500, "InternalServerError"),
                              "403": (403, "ExpiredProviderToken"), "413": (413, "PayloadTooLarge")}[mode]
            wait = self.fake.slow.get(request.token) or random.uniform(0, self.fake.delay_s)
            if wait > 0:
                asyncio.get_running_loop().call_later(wait, self._late, stream_id, status, reason, request)
                return
            if status == 200:
                self.fake.accepted.append(request)
        self._reply(stream_id, status, reason)

    def _late(self, stream_id: int, status: int, reason: str, request: ApnsRequest) -> None:
        """A delayed answer: accepted only if the client is still there to read it."""
        assert self.transport is not None
        if self.transport.is_closing():
            return
        if status == 200:
            self.fake.accepted.append(request)
        self._reply(stream_id, status, reason)
        self.transport.write(self.conn.data_to_send())

    def _reply(self, stream_id: int, status: int, reason: str) -> None:
        extra = [("retry-after", self.fake.retry_after)] if status == 429 else []
        answer = json.dumps({"reason": reason}).encode() if reason else b""
        self.conn.send_headers(stream_id, [(":status", str(status)), ("apns-id", f"fake-{stream_id}"), *extra],
                               end_stream=not answer)
        if answer:
            self.conn.send_data(stream_id, answer, end_stream=True)
