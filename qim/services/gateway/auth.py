"""Development tokens for AUTH (docs/protocol.md "Auth.token").

Form: `dev1.<tenant_hex32>.<user>.<device>.<hmac_hex>`, hmac = HMAC-SHA256(secret,
everything before the last dot). Development only: production auth is a separate
token service (not built; docs/status.md). Tokens are never logged.
"""

from __future__ import annotations

import hashlib
import hmac

from qim.consts import U63_MAX
from qim.errors import ErrorCode, RequestError

PREFIX = "dev1"


def issue_dev_token(secret: bytes, tenant: int, user_id: int, device_id: int) -> str:
    """A token for (tenant u128, user u64 > 0, device u64 > 0). ValueError on bad ids."""
    if not (0 <= tenant < 1 << 128) or not (0 < user_id <= U63_MAX) or not (0 < device_id <= U63_MAX):
        raise ValueError("tenant must be u128, user_id and device_id non-zero with bit 63 clear")
    payload = f"{PREFIX}.{tenant:032x}.{user_id}.{device_id}"
    mac = hmac.new(secret, payload.encode(), hashlib.sha256).hexdigest()
    return f"{payload}.{mac}"


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
