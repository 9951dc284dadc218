"""AUTH on a client connection, and login admission (docs/decisions/0078-login-admission.md).

A reconnect storm (every device of a restarted gateway coming back at once) used to be
served all at once: hundreds of AUTHs verified, registered and announced concurrently,
each slower for the others, the devices waiting 16 s (P50) for a restart of 3.8 s.
`LoginAdmission` bounds it: at most `inflight` AUTHs of new connections are served at
once (token check, session epoch, registration, revocation check, presence), at most
`queue` more wait for a slot in arrival order, and an AUTH past both is refused at once
with ERROR(UNAVAILABLE) and a `retry_after_ms` that gives it a place in a virtual queue
behind the ones already waiting or told to come back: (waiting + in flight + told) /
rate, where rate is PLANNED_SHARE of the logins per second the gateway just achieved
(`inflight` over the mean login time), ±10 % jitter. Refused clients therefore come
back spread at about the rate the gateway verifies logins, not together. The SDKs treat a hint as the
earliest retry (qim/sdk/reconnect.py, web/src/sdk/reconnect.ts). Counted in
qim_gateway_login_refused_total; qim_gateway_logins_waiting is the queue. The TLS
handshake before the AUTH is not gated: a concurrency limit on handshakes held its
slots through the clients' round trips and cut the login rate (decision 0078). A token
refresh on a live connection is not admitted (it holds its slot already).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from typing import TYPE_CHECKING, AsyncIterator, Callable, Optional, cast

from google.protobuf.message import DecodeError

from qim._core import ids
from qim.errors import ErrorCode, RequestError
from qim.proto.v1 import connection_pb2
from qim.protocol import Opcode
from qim.stores.bans import Ban
from qim.wire.tokens import TokenRefused

if TYPE_CHECKING:
    from qim.net.transport import FrameTransport
    from qim.services.gateway.auth import Authenticator
    from qim.services.gateway.context import GatewayContext
    from qim.services.gateway.metrics import GatewayMetrics
    from qim.services.gateway.online import DeviceConn
    from qim.services.gateway.ratelimit import SendLimiter

logger = logging.getLogger(__name__)
FIRST_LOGIN_S = 0.05  # the mean login time assumed before any was measured
# hints plan returns at this share of the measured rate: a return too early costs a TLS
# handshake and another refusal, one too late a slot idle for a moment
PLANNED_SHARE = 0.8
MAX_HINT_MS = 60_000


class LoginBusy(RequestError):
    """ERROR(UNAVAILABLE) to an AUTH past the login queue, with retry_after_ms (≥ 1)."""

    def __init__(self, message: str, retry_after_ms: int) -> None:
        super().__init__(ErrorCode.UNAVAILABLE, message)
        self.retry_after_ms = max(1, retry_after_ms)


class LoginAdmission:
    """At most `inflight` logins served at once, `queue` waiting (module docstring);
    `metrics` a GatewayMetrics or None; `clock` monotonic seconds."""

    def __init__(self, inflight: int, queue: int, metrics: Optional[GatewayMetrics] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if inflight < 1 or queue < 0:
            raise ValueError("a login admission needs inflight >= 1 and queue >= 0")
        self.inflight, self.queue = inflight, queue
        self._slots = asyncio.Semaphore(inflight)
        self._m, self._clock = metrics, clock
        self.waiting = 0
        self.mean_s = FIRST_LOGIN_S  # moving mean of one login's time in its slot
        self._told = 0.0  # refused logins told to come back, not yet due (drains at `rate`)
        self._told_at = clock()
        self.refused = 0

    @property
    def rate(self) -> float:
        """Logins per second the gateway serves now (inflight / mean login time)."""
        return self.inflight / max(self.mean_s, 1e-4)

    def hint_ms(self) -> int:
        """The retry-after of one more refused login: its place behind everyone waiting,
        in flight or told to come back already, at `rate`, ±10 %."""
        now, rate = self._clock(), self.rate * PLANNED_SHARE
        self._told = max(0.0, self._told - (now - self._told_at) * rate) + 1
        self._told_at = now
        ahead = self.waiting + self.inflight + self._told
        return min(MAX_HINT_MS, int(1000 * ahead / rate * random.uniform(0.9, 1.1)) + 1)

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one login slot for the body (waiting in line while all are taken);
        LoginBusy at once when the line is full."""
        if self._slots.locked() and self.waiting >= self.queue:
            self.refused += 1
            if self._m is not None:
                self._m.login_refused.inc()
            raise LoginBusy(f"gateway busy: {self.waiting} logins waiting, about {self.rate:.0f} served a second",
                            self.hint_ms())
        self.waiting += 1
        self._gauge()
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
            self._gauge()
        started = self._clock()
        try:
            yield
        finally:
            self.mean_s += (self._clock() - started - self.mean_s) / 8  # over roughly the last 8 logins
            self._slots.release()

    def _gauge(self) -> None:
        if self._m is not None:
            self._m.logins_waiting.set(self.waiting)


class LoginMixin:
    """The AUTH half of DeviceSession (device_session.py): AUTH of a new session
    (admitted by the gateway's LoginAdmission when it has one) and the token refresh of
    a live one; the KICKED{TOKEN_EXPIRED} at the token's exp."""

    # what DeviceSession holds (device_session.py): typed here so these methods are checked
    gw: GatewayContext
    _m: GatewayMetrics
    _authn: Authenticator
    _limiter: SendLimiter
    _expiry: Optional[asyncio.TimerHandle]  # the KICKED{TOKEN_EXPIRED} timer, once armed
    tenant: int
    user_id: int
    device_id: int
    shard: int
    lane: int
    session_epoch: int
    token_iat: int
    display_name: str
    heartbeat_s: int

    @property
    def stream(self) -> FrameTransport:
        """The attached connection's FrameTransport: DeviceSession's."""
        raise NotImplementedError

    def revoked(self, ban: Optional[Ban] = None) -> None:
        """KICKED{REVOKED} (KICKED{BANNED} for a ban), then close: DeviceSession's."""
        raise NotImplementedError

    def _token_expired(self) -> None:
        """The token's exp (+ leeway) passed: KICKED{TOKEN_EXPIRED}, then close."""
        if self.stream.closed:
            return
        self._m.token_expired.inc()
        body = connection_pb2.Kicked(reason=connection_pb2.Kicked.TOKEN_EXPIRED).SerializeToString()
        self.stream.send(Opcode.KICKED, 0, body)
        self.stream.close()

    async def _auth(self, body: bytes) -> tuple[int, bytes]:
        """AUTH, or on an authenticated connection a token refresh: a fresh token of the
        same device replaces the old one (its expiry and revocation check) without a
        reconnect (docs/protocol.md AUTH); another identity is INVALID_ARGUMENT."""
        admission = self.gw.logins  # None: no admission (a unit test's stand-in)
        if self.user_id or admission is None:
            return await self._login(body)
        async with admission.slot():
            return await self._login(body)

    async def _login(self, body: bytes) -> tuple[int, bytes]:
        try:
            auth = connection_pb2.Auth.FromString(body)
        except DecodeError:
            raise RequestError(ErrorCode.INVALID_ARGUMENT, "AUTH body is not a valid Auth") from None
        try:
            (tenant, user, device, expires_at, iat), name = self._authn.authenticate(auth.token)
        except TokenRefused as exc:  # the reason only: never the token (docs/design.md §2)
            logger.debug("AUTH from %s refused: %s", self.stream.peer, exc.reason)
            raise
        revocations = self.gw.revocations  # None: no Redis (a unit test's stand-in)
        if self.user_id:
            if (tenant, user, device) != (self.tenant, self.user_id, self.device_id):
                raise RequestError(ErrorCode.INVALID_ARGUMENT, "already authenticated as another device")
            old_iat, self.token_iat = self.token_iat, iat
            try:
                if revocations is not None:
                    await revocations.admit(self)
            except TokenRefused as exc:  # revoked: this device is cut now, whatever its old token
                self.revoked(getattr(exc, "ban", None))
                raise
            except BaseException:
                self.token_iat = old_iat
                raise
            self._m.token_refreshes.inc()
        else:
            lane, _, shard = ids.user_placement(tenant, user, self.gw.config.common.shard_count)
            epochs = self.gw.epochs  # None: no registry (a unit test's stand-in): session_epoch 0
            epoch = await epochs.next_epoch(tenant, user, device) if epochs is not None else 0
            self.tenant, self.user_id, self.device_id, self.shard, self.lane = tenant, user, device, shard, lane
            self.session_epoch = epoch
            self.token_iat = iat
            try:
                self.gw.online.register(cast("DeviceConn", self))  # RateLimited past the per-user connection cap
                if revocations is not None:  # after registering: a revocation published meanwhile finds it
                    await revocations.admit(self)
            except BaseException:
                self.gw.online.unregister(cast("DeviceConn", self))  # DeviceSession is one
                self.tenant = self.user_id = self.device_id = self.shard = self.lane = 0
                raise
            if self.gw.presence is not None:
                self.gw.presence.online(self)
            self.stream.buffer_limit = None
        self.display_name = name  # checked by the verifier
        # the session ends with the token (docs/decisions/0021-tokens-and-limits.md)
        if self._expiry is not None:
            self._expiry.cancel()
        delay = max(0.0, expires_at + self._authn.leeway_s - time.time())
        self._expiry = asyncio.get_running_loop().call_later(delay, self._token_expired)
        ok = connection_pb2.AuthOk(tenant_id=tenant.to_bytes(16, "big"), user_id=user, device_id=device,
                                   server_time_ms=time.time_ns() // 1_000_000, heartbeat_s=self.heartbeat_s,
                                   mailbox_lane=self.lane, mailbox_shard=self.shard,
                                   max_body_bytes=self.gw.config.max_body)
        ok.send_rate_per_s, ok.send_burst = self._limiter.advertised()  # the SDK paces below it (ratelimit.py)
        return Opcode.AUTH_OK, ok.SerializeToString()
