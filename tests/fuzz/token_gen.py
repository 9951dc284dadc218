"""AUTH tokens for the gateway request target (tests/fuzz/target_requests.py).

`token(d, ctx)` -> (token, identity): the token text and the (tenant, user, device) it
may be accepted as, or None when the gateway must refuse it whatever happens (never
signed by the trusted key, or signed for another tenant). Kinds: a valid token; the
trusted key signing drawn claims (what a buggy issuer could produce: ids out of range,
non-canonical digits, odd times, NaN and Infinity); a valid token mutated (a character,
the signature, the header re-encoded with alg "none" or HS256 or another kid); JWT parts
built by hand (deep JSON nesting, non-object headers); junk text.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any, Optional

from qim.consts import U63_MAX
from tests.fuzz.draw import Draw
from tests.fuzz.proto_gen import Ctx

Identity = tuple[int, int, int]
NUMBERS = ("7", "0", "1", str(U63_MAX), str(U63_MAX + 1), "-1", "\u0667", " 7", "7\n", "", "1" * 400, "0x7", "07")
TIMES = (0, -1, 1 << 62, 1.5, float("nan"), float("inf"), "1", True, None)


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _key() -> Any:
    from tests.gateway import standin

    return standin


def _claims(d: Draw, ctx: Ctx) -> tuple[dict, Optional[Identity]]:
    """Drawn claims and the identity they name when they look like issue_token's."""
    from qim.consts import TOKEN_AUDIENCE_DEFAULT, TOKEN_ISSUER_DEFAULT

    now = int(time.time())
    claims: dict[str, Any] = {"iss": TOKEN_ISSUER_DEFAULT, "aud": TOKEN_AUDIENCE_DEFAULT, "sub": str(ctx.user),
                              "tenant": "0" * 32, "dev": "1", "iat": now, "nbf": now, "exp": now + 600}
    for name in list(claims):
        if d.chance(40):
            roll = d.below(4)
            if name in ("sub", "dev"):
                claims[name] = d.choice(NUMBERS) if roll else d.choice((7, None, [7], {"a": 1}))
            elif name == "tenant":
                claims[name] = d.choice(("0" * 31, "0" * 33, "g" * 32, "F" * 32, "+" + "0" * 31, "0" * 31 + "1", 0))
            elif name in ("iat", "nbf", "exp"):
                claims[name] = d.choice(TIMES) if roll else now + d.choice((-10_000, 86_401, 10 ** 30))
            else:
                claims[name] = d.choice(("x", "", [claims[name]], 1, None))
            if d.chance(30):
                del claims[name]
    ident: Optional[Identity] = None
    try:
        ident = (int(claims["tenant"], 16), int(claims["sub"]), int(claims["dev"]))
    except (KeyError, TypeError, ValueError):
        pass
    return claims, ident


def _header_json(d: Draw, kid: str) -> bytes:
    how = d.below(6)
    if how == 0:
        depth = d.choice((10, 900, 1100, 3000, 6000))
        return b"[" * depth + b"]" * depth
    if how == 1:
        return d.choice((b"[]", b"1", b"null", b'"x"', b"{", b"{}", b'{"alg": "EdDSA", "kid": {"a": [1]}}'))
    alg = d.choice(("none", "HS256", "EdDSA", "ES256", "RS256", 1, None, "eddsa"))
    return json.dumps({"alg": alg, "kid": d.choice((kid, "", 123, [kid], "k" * 1000, None)), "typ": "JWT"}).encode()


def token(d: Draw, ctx: Ctx) -> tuple[str, Optional[Identity]]:
    """One AUTH token and the identity it may be accepted as (None: must be refused)."""
    import jwt

    standin = _key()
    kind = d.below(8)
    if kind <= 1:  # valid; sometimes another tenant's
        tenant = 0 if d.chance(220) else 5
        user, device = d.choice((ctx.user, 1, U63_MAX)), d.choice((1, 2, U63_MAX))
        tok = standin.token(user, device, tenant=tenant)
        return tok, (tenant, user, device) if tenant == 0 else None
    if kind == 2:  # the trusted key signing whatever claims
        claims, ident = _claims(d, ctx)
        headers = {"kid": standin.KEY.kid}
        if d.chance(40):
            headers["crit"] = ["x"]
        # signed as raw JWS: PyJWT's encode would refuse some of these claims before signing
        tok = jwt.api_jws.encode(json.dumps(claims).encode(), standin.KEY.private, algorithm=standin.KEY.alg,
                                 headers=headers)
        return tok, ident if ident and ident[0] == 0 else None
    if kind <= 4:  # a valid token, mutated
        user = d.choice((ctx.user, 1))
        tok = standin.token(user, 1)
        head, payload, sig = tok.split(".")
        how = d.below(6)
        if how == 0 and tok:
            at = d.below(len(tok))
            tok = tok[:at] + d.choice(("A", "_", "-", "=", ".", "", "\u00e9")) + tok[at + 1:]
        elif how == 1:
            tok = f"{head}.{payload}."
        elif how == 2:
            tok = f"{_b64(_header_json(d, standin.KEY.kid))}.{payload}.{sig}"
        elif how == 3:
            tok = f"{head}.{payload}.{sig}{d.choice(('A', 'AA', '==', '.x'))}"
        elif how == 4:
            tok = f"{payload}.{head}.{sig}"
        else:
            tok = tok + "\n" if d.chance(128) else " " + tok
        return tok, (0, user, 1)
    if kind <= 6:  # hand-built parts
        claims, _ = _claims(d, ctx)
        payload = json.dumps(claims).encode() if d.chance(200) else _header_json(d, standin.KEY.kid)
        parts = [_b64(_header_json(d, standin.KEY.kid)), _b64(payload), _b64(d.blob(64))]
        return ".".join(parts[:d.between(1, 3)] if d.chance(40) else parts), None
    junk = d.blob(200).decode("latin-1")
    return (junk * d.choice((1, 50))) if d.chance(60) else junk, None
