"""Development tokens for AUTH (docs/protocol.md "Auth.token"): the one definition,
used by the gateway (verify) and by qimctl, qim-loadgen, qim-desktop, the SDK examples
and tests (issue).

Form: `dev1.<tenant_hex32>.<user>.<device>.<hmac_hex>`, hmac = HMAC-SHA256(secret,
everything before the last dot) in lowercase hex. The secret is the bytes of
`QIM_DEV_TOKEN_SECRET` as written (development only: production auth is a separate
token service, not built; docs/status.md). The token names the device: one token per
(tenant, user, device). Tokens are never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import NamedTuple, Optional

from qim.consts import U63_MAX
from qim.errors import ErrorCode, RequestError

PREFIX = "dev1"
SECRET_ENV = "QIM_DEV_TOKEN_SECRET"


class TokenClaims(NamedTuple):
    """Identity a development token names (tenant u128, user and device u64 > 0)."""

    tenant: int
    user_id: int
    device_id: int


def _payload(tenant: int, user_id: int, device_id: int) -> str:
    if not (0 <= tenant < 1 << 128) or not (0 < user_id <= U63_MAX) or not (0 < device_id <= U63_MAX):
        raise ValueError("tenant must be u128, user_id and device_id non-zero with bit 63 clear")
    return f"{PREFIX}.{tenant:032x}.{user_id}.{device_id}"


def issue_dev_token(secret: bytes, tenant: int, user_id: int, device_id: int) -> str:
    """A token for (tenant u128, user u64 > 0, device u64 > 0). ValueError on bad ids."""
    payload = _payload(tenant, user_id, device_id)
    mac = hmac.new(secret, payload.encode(), hashlib.sha256).hexdigest()
    return f"{payload}.{mac}"


def token_claims(token: str) -> TokenClaims:
    """The identity a token names, WITHOUT checking its signature (a client learns its
    own tenant/user/device this way; only the gateway can verify). ValueError when the
    token is not of the dev1 form."""
    payload, sep, mac = token.strip().rpartition(".")
    parts = payload.split(".")
    if not sep or len(parts) != 4 or parts[0] != PREFIX or len(parts[1]) != 32 or len(mac) != 64:
        raise ValueError("not a development token (dev1.<tenant_hex32>.<user>.<device>.<hmac>)")
    try:
        claims = TokenClaims(int(parts[1], 16), int(parts[2]), int(parts[3]))
    except ValueError:
        raise ValueError("development token with a non-numeric field") from None
    _payload(*claims)  # ids in range (ValueError otherwise)
    return claims


def verify_dev_token(secret: bytes, token: str) -> tuple[int, int, int]:
    """(tenant, user_id, device_id) of a valid token; RequestError(UNAUTHENTICATED) otherwise."""
    fail = RequestError(ErrorCode.UNAUTHENTICATED, "invalid token")
    payload, sep, mac = token.rpartition(".")
    parts = payload.split(".")
    if not sep or len(parts) != 4 or parts[0] != PREFIX:
        raise fail
    expected = hmac.new(secret, payload.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, mac):
        raise fail
    try:
        tenant, user_id, device_id = int(parts[1], 16), int(parts[2]), int(parts[3])
    except ValueError:
        raise fail from None
    # ids reach CQL bigint and the event codec: bit 63 must be clear (DESIGN.md §3)
    if len(parts[1]) != 32 or not (0 < user_id <= U63_MAX) or not (0 < device_id <= U63_MAX):
        raise fail
    return tenant, user_id, device_id


def secret_from_env(explicit: Optional[str] = None, environ=None) -> bytes:
    """The secret bytes: `explicit` when given, else $QIM_DEV_TOKEN_SECRET. ValueError
    when neither is set (or it is empty)."""
    env = os.environ if environ is None else environ
    value = explicit if explicit is not None else env.get(SECRET_ENV, "")
    if not value:
        raise ValueError(f"no token secret: pass --secret or set {SECRET_ENV}")
    return value.encode()
