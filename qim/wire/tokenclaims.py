"""Reading a QIM token WITHOUT verifying it (qim/wire/tokens.py verifies): the identity,
display name and times a token claims. A client learns its own identity this way; only
the gateway trusts a token, after TokenVerifier accepted it. The claims' layout:
qim/wire/tokens.py's module doc (docs/decisions/0021)."""

from __future__ import annotations

from typing import NamedTuple, Optional

import jwt

from qim.consts import U63_MAX
from qim.wire.names import check_name


class TokenClaims(NamedTuple):
    """Identity a token names (tenant u128, user and device u64 > 0, bit 63 clear)."""

    tenant: int
    user_id: int
    device_id: int


def check_identity(tenant: int, user_id: int, device_id: int) -> None:
    """ValueError unless tenant is a u128 and user and device are non-zero with bit 63
    clear (they reach CQL bigint and the event codec: docs/design.md §3)."""
    if not (0 <= tenant < 1 << 128) or not (0 < user_id <= U63_MAX) or not (0 < device_id <= U63_MAX):
        raise ValueError("tenant must be u128, user_id and device_id non-zero with bit 63 clear")


def _ids(claims: dict) -> TokenClaims:
    """The identity claims, ValueError when absent or out of range."""
    sub, dev, tenant = claims.get("sub"), claims.get("dev"), claims.get("tenant")
    if not (isinstance(sub, str) and sub.isdigit() and isinstance(dev, str) and dev.isdigit()
            and isinstance(tenant, str) and len(tenant) == 32):
        raise ValueError("token claims sub, dev and tenant must be a decimal user id, a decimal device id and "
                         "32 hex digits")
    try:
        ident = TokenClaims(int(tenant, 16), int(sub), int(dev))
    except ValueError:
        raise ValueError("token claim tenant is not hexadecimal") from None
    check_identity(*ident)
    return ident


def token_claims(token: str) -> TokenClaims:
    """The identity a token names WITHOUT checking its signature or times (a client
    learns its own tenant, user and device this way; only the gateway verifies).
    ValueError when it is not a QIM token."""
    try:
        claims = jwt.decode(token.strip(), options={"verify_signature": False})
    except jwt.PyJWTError:
        raise ValueError("not a QIM token (a JWT from `qimctl token` or the token service)") from None
    return _ids(claims)


def token_name(token: str) -> str:
    """The unverified display name a token claims ("" when none, or when the claim is not
    a valid name: the gateway refuses such a token anyway)."""
    try:
        name = jwt.decode(token.strip(), options={"verify_signature": False}).get("name", "")
        return check_name(name)
    except (jwt.PyJWTError, ValueError):
        return ""


def token_expiry(token: str, claim: str = "exp") -> Optional[int]:
    """The unverified `exp` (or `claim`: "iat") of a token, unix seconds; None when it has
    none or is not a JWT. Trusted only after TokenVerifier.verify accepted the token."""
    try:
        value = jwt.decode(token.strip(), options={"verify_signature": False}).get(claim)
    except jwt.PyJWTError:
        return None
    return value if isinstance(value, int) else None
