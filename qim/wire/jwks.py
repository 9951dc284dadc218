"""Token verification keys from a JWKS document (RFC 7517), the form a token service
publishes them in: `{"keys": [{"kty": "OKP", "crv": "Ed25519", "x": …, "kid": …}, {"kty":
"EC", "crv": "P-256", "x": …, "y": …, "kid": …}]}` (docs/operations.md "Tokens and keys").

The gateway reads it from a file or an http(s) URL on the operator's network
(QIM_TOKEN_JWKS) at start and again every QIM_TOKEN_JWKS_REFRESH_S, and at once (at most
every MIN_REFRESH_S) when a token names a kid it does not know: rotation is the token
service publishing the new key, then signing with it (qim/services/gateway/keys.py).
A key is selected by the document's `kid`, and its algorithm is pinned by its type (Ed25519:
EdDSA, P-256: ES256; ES256 and EdDSA only, as in qim/wire/tokens.py). A document holding
private key material, a key without `kid`, two keys with one kid or no usable key is
refused whole (ValueError naming why): the gateway keeps the keys it had.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Union

import jwt

from qim.wire.tokens import VerifyKey

MIN_REFRESH_S = 5.0
READ_TIMEOUT_S = 5.0
MAX_BYTES = 1 << 20
_ALG = {("OKP", "Ed25519"): "EdDSA", ("EC", "P-256"): "ES256"}


def parse_jwks(data: Union[bytes, str]) -> tuple[VerifyKey, ...]:
    """The signature keys of a JWKS document (module doc); keys of another use, type or
    curve are skipped. ValueError for a document refused whole."""
    try:
        doc = json.loads(data)
        entries = doc["keys"]
    except (ValueError, KeyError, TypeError):
        raise ValueError("not a JWKS document (a JSON object with a `keys` list)") from None
    if not isinstance(entries, list):
        raise ValueError("JWKS `keys` is not a list")
    out: dict[str, VerifyKey] = {}
    for jwk in entries:
        if not isinstance(jwk, dict):
            raise ValueError("a JWKS entry is not an object")
        if "d" in jwk:
            raise ValueError(f"JWKS key {jwk.get('kid')!r} holds private key material: publish public keys only")
        alg = _ALG.get((str(jwk.get("kty")), str(jwk.get("crv"))))
        if alg is None or jwk.get("use", "sig") != "sig":
            continue
        kid = jwk.get("kid")
        if not isinstance(kid, str) or not kid:
            raise ValueError("a JWKS signature key has no kid")
        if kid in out:
            raise ValueError(f"two JWKS keys have the kid {kid!r}")
        try:
            public = jwt.PyJWK(jwk, algorithm=alg).key
        except jwt.PyJWTError as exc:
            raise ValueError(f"JWKS key {kid!r} is not a valid {alg} key: {exc}") from None
        out[kid] = VerifyKey(public, kid, alg)
    if not out:
        raise ValueError("the JWKS document has no Ed25519 or P-256 signature key")
    return tuple(out.values())


def read_jwks(location: str, timeout: float = READ_TIMEOUT_S) -> bytes:
    """The bytes of the document at `location`: an http(s) URL or a file path. Blocking
    (call it off the event loop); OSError (urllib's URLError is one) when unreachable,
    ValueError when larger than MAX_BYTES."""
    if location.startswith(("http://", "https://")):
        with urllib.request.urlopen(location, timeout=timeout) as r:  # noqa: S310 - the operator's URL
            data = r.read(MAX_BYTES + 1)
    else:
        data = Path(location).read_bytes()
    if len(data) > MAX_BYTES:
        raise ValueError(f"the JWKS document at {location} is larger than {MAX_BYTES} bytes")
    return data


def jwk_of(key: VerifyKey, kid: str) -> dict:
    """The public JWK of `key` under `kid` (what a token service publishes; tests, tools)."""
    raw = json.loads(jwt.algorithms.get_default_algorithms()[key.alg].to_jwk(key.public))
    return {**raw, "kid": kid, "use": "sig", "alg": key.alg}
