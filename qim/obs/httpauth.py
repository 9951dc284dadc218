"""Device-token authentication of HTTP routes (qim/obs/http.py;
docs/decisions/0111-an-http-seam-on-aiohttp.md).

`Authorization: Bearer <device token>` is verified exactly as the gateway's AUTH
verifies a token (qim/wire/tokens.py TokenVerifier: keys by kid, pinned algorithm,
audience, issuer, leeway, longest lifetime) and must name this deployment's tenant;
then, when the service has the revocation list (`cutoffs`: RevocationStore.cutoffs,
qim/stores/revocations.py), a token issued at or before its device's or user's cutoff
is refused (docs/decisions/0036-ops-tokens-jwks-revocation.md), as the gateway's
`Revocations.admit` refuses it.

Refusals are HttpRefused: 401 (no token, another scheme, any TokenRefused reason but
`revoked`; with `WWW-Authenticate: Bearer`), 403 for a revoked token, 503 while the
revocation list cannot be read. Unlike the gateway, which lets an AUTH in unchecked
and checks every connection again once the list answers, an HTTP request is over
before any recheck could reach it: it is refused (fail closed), and the client retries.
Each refusal counts in `qim_http_auth_refused_total{reason}` (the fixed words of
qim/wire/tokens.py REASONS, plus `missing` and `unavailable`); the token is never
logged or echoed.
"""

from __future__ import annotations

from typing import Awaitable, Callable, Optional, Sequence

from qim.errors import EngineError
from qim.wire.tokens import TokenRefused, TokenVerifier, VerifiedToken

Cutoffs = Callable[[Sequence[tuple[int, int, int]]], Awaitable[list[int]]]


class HttpRefused(Exception):
    """A request refused before its handler: `status` (an HTTP status code), `reason`
    (a fixed word, a metric label) and `message` (the body, safe to show)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


class DeviceAuth:
    """Verifies the bearer device token of a request (module doc). `verifier`: the
    service's TokenVerifier (built from QIM_TOKEN_* as the gateway builds its own);
    `tenant`: QIM_TENANT_ID; `cutoffs`: the revocation list's read, or None when the
    service has no Redis (then revocation is not checked: say so in its docs)."""

    def __init__(self, verifier: TokenVerifier, tenant: int, cutoffs: Optional[Cutoffs] = None) -> None:
        self.verifier, self.tenant, self.cutoffs = verifier, tenant, cutoffs

    async def authenticate(self, authorization: Optional[str]) -> VerifiedToken:
        """The device the `Authorization` header's token proves; HttpRefused otherwise."""
        scheme, _, token = (authorization or "").strip().partition(" ")
        if not authorization:
            raise HttpRefused(401, "missing", "an Authorization: Bearer <device token> header is required")
        if scheme.lower() != "bearer" or not token.strip():
            raise HttpRefused(401, "malformed", "the Authorization header must be: Bearer <device token>")
        try:
            device = self.verifier.verify(token.strip())
            if device.tenant != self.tenant:
                raise TokenRefused("tenant", "token is for another tenant")
        except TokenRefused as exc:
            raise HttpRefused(401, exc.reason, str(exc.message)) from None
        if self.cutoffs is not None:
            try:
                cutoff = (await self.cutoffs([(device.tenant, device.user_id, device.device_id)]))[0]
            except EngineError:
                raise HttpRefused(503, "unavailable", "the revocation list cannot be read now; retry") from None
            if device.issued_at <= cutoff:
                raise HttpRefused(403, "revoked", "token revoked for this device: sign in again")
        return device
