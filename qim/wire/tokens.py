"""Signed, expiring AUTH tokens: JWT (PyJWT) over Ed25519 (EdDSA) or P-256 (ES256) keys
(docs/decisions/0021; docs/protocol.md "Auth.token"; docs/operations.md "Tokens and keys").

A token names one device: header `{"alg": "EdDSA"|"ES256", "kid": KID, "typ": "JWT"}`,
claims `iss`, `aud` (the deployment's audience, QIM_TOKEN_AUDIENCE), `sub` (user id,
decimal string), `tenant` (32 lowercase hex digits), `dev` (device id, decimal string),
`iat`, `nbf`, `exp` (unix seconds), and optionally `name`: the user's display name (at
most 64 bytes of UTF-8, no control characters: qim/wire/names.py; shown beside the user's messages,
never a key: docs/protocol.md "Names"). Ids travel as strings because a u63 does not fit
a JSON number that every language reads exactly (2^53).

`kid` is derived from the public key (`kid_of`: "k" + the first 16 hex digits of
SHA-256 of its SubjectPublicKeyInfo DER), so the issuer and the gateway agree on it
without configuration and two keys can be valid at once (rotation: the gateway picks
the key by kid). The verifier pins the algorithm to the one of the selected key: `none`,
HS* (a public key used as an HMAC secret: algorithm confusion) and any alg that does not
match the key are refused before a signature is looked at.

Tokens and keys are never logged; refusal reasons are fixed words (metric labels).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, NamedTuple, Optional, Union

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from qim.consts import TOKEN_MAX_BYTES
from qim.errors import ErrorCode, RequestError
from qim.wire.names import check_name

# the unverified reads live in tokenclaims.py; importers keep using these names from here
from qim.wire.tokenclaims import TokenClaims, _ids, check_identity, token_claims, token_expiry, token_name

__all__ = ["ALGORITHMS", "REASONS", "SigningKey", "TokenClaims", "TokenRefused", "TokenVerifier", "VerifiedToken",
           "VerifyKey", "check_identity", "issue_token", "kid_of", "load_verify_keys", "token_claims",
           "token_expiry", "token_name"]

ALGORITHMS = ("EdDSA", "ES256")  # the only ones ever accepted (pinned per key)
PrivateKey = Union[ed25519.Ed25519PrivateKey, ec.EllipticCurvePrivateKey]
PublicKey = Union[ed25519.Ed25519PublicKey, ec.EllipticCurvePublicKey]

# Refusal reasons, the label values of qim_gateway_auth_refused_total{reason}.
REASONS = ("malformed", "algorithm", "unknown_kid", "signature", "expired", "not_yet_valid", "audience", "issuer",
           "claims", "lifetime", "tenant", "revoked")


class VerifiedToken(NamedTuple):
    """A token the verifier accepted: its identity, `expires_at` and `issued_at` (unix
    seconds; a refresh's revocation check compares iat). Its display name (checked by the
    verifier too) is `token_name(token)`, or the second value of
    `TokenVerifier.verify_named`."""

    tenant: int
    user_id: int
    device_id: int
    expires_at: int
    issued_at: int


class TokenRefused(RequestError):
    """AUTH refused: UNAUTHENTICATED. `reason` is one of REASONS (a metric label); the
    message says what was wrong without repeating any part of the token."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(ErrorCode.UNAUTHENTICATED, message)
        self.reason = reason


def _alg_of(key: Union[PrivateKey, PublicKey]) -> str:
    if isinstance(key, (ed25519.Ed25519PrivateKey, ed25519.Ed25519PublicKey)):
        return "EdDSA"
    if isinstance(key, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)) and key.curve.name == "secp256r1":
        return "ES256"
    raise ValueError("token keys must be Ed25519 (EdDSA) or EC P-256 (ES256)")


def kid_of(public: PublicKey) -> str:
    """The key id of a public key: "k" + 16 hex digits of SHA-256(SubjectPublicKeyInfo DER)."""
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "k" + hashlib.sha256(der).hexdigest()[:16]


@dataclass(frozen=True)
class VerifyKey:
    """A public key the gateway trusts, with its kid and pinned algorithm."""

    public: PublicKey
    kid: str
    alg: str

    @classmethod
    def from_public(cls, public: PublicKey) -> "VerifyKey":
        """Wrap a cryptography public key (ValueError for another key type)."""
        return cls(public, kid_of(public), _alg_of(public))

    @classmethod
    def from_pem(cls, data: bytes) -> "VerifyKey":
        """A PEM SubjectPublicKeyInfo ("BEGIN PUBLIC KEY"); ValueError otherwise (a
        private key is refused: the gateway holds public keys only)."""
        if b"PRIVATE KEY" in data:
            raise ValueError("this is a private key; give the gateway the public key only")
        try:
            public = serialization.load_pem_public_key(data)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"not a PEM public key ({exc.__class__.__name__})") from None
        return cls.from_public(public)  # type: ignore[arg-type]

    @classmethod
    def load(cls, path: Union[str, Path]) -> "VerifyKey":
        """Read a PEM public key file (OSError, ValueError)."""
        return cls.from_pem(Path(path).read_bytes())

    def public_pem(self) -> bytes:
        """The key as PEM SubjectPublicKeyInfo."""
        return self.public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


@dataclass(frozen=True)
class SigningKey:
    """A private key that issues tokens, with the kid of its public half."""

    private: PrivateKey
    kid: str
    alg: str

    def __repr__(self) -> str:  # never print key material
        return f"SigningKey(kid={self.kid!r}, alg={self.alg!r})"

    @classmethod
    def from_private(cls, private: PrivateKey) -> "SigningKey":
        """Wrap a cryptography private key (ValueError for another key type)."""
        return cls(private, kid_of(private.public_key()), _alg_of(private))

    @classmethod
    def generate(cls, alg: str = "EdDSA") -> "SigningKey":
        """A new random key: Ed25519 for "EdDSA", P-256 for "ES256"."""
        if alg == "EdDSA":
            return cls.from_private(ed25519.Ed25519PrivateKey.generate())
        if alg == "ES256":
            return cls.from_private(ec.generate_private_key(ec.SECP256R1()))
        raise ValueError(f"unsupported algorithm {alg!r}; use one of {', '.join(ALGORITHMS)}")

    @classmethod
    def from_pem(cls, data: bytes) -> "SigningKey":
        """An unencrypted PEM private key (PKCS#8); ValueError otherwise."""
        try:
            private = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"not an unencrypted PEM private key ({exc.__class__.__name__})") from None
        return cls.from_private(private)  # type: ignore[arg-type]

    @classmethod
    def load(cls, path: Union[str, Path]) -> "SigningKey":
        """Read a PEM private key file (OSError, ValueError)."""
        return cls.from_pem(Path(path).read_bytes())

    def private_pem(self) -> bytes:
        """The key as unencrypted PKCS#8 PEM (write it with mode 0600)."""
        return self.private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption())

    def verify_key(self) -> VerifyKey:
        """The public half, as the gateway loads it."""
        return VerifyKey.from_public(self.private.public_key())


def issue_token(key: SigningKey, tenant: int, user_id: int, device_id: int, *, audience: str, issuer: str,
                ttl_s: int, now: Optional[int] = None, not_before: Optional[int] = None, name: str = "") -> str:
    """A signed token for (tenant, user, device) valid from `not_before` (default: `now`)
    for `ttl_s` seconds after `now` (default: the current time; unix seconds), claiming
    the display `name` when given. ValueError on bad ids, a non-positive ttl or a bad
    name (check_name)."""
    check_identity(tenant, user_id, device_id)
    if ttl_s <= 0:
        raise ValueError("ttl_s must be positive")
    display = check_name(name)
    iat = int(time.time()) if now is None else int(now)
    claims = {"iss": issuer, "aud": audience, "sub": str(user_id), "tenant": f"{tenant:032x}", "dev": str(device_id),
              "iat": iat, "nbf": iat if not_before is None else int(not_before), "exp": iat + int(ttl_s)}
    if display:
        claims["name"] = display
    return jwt.encode(claims, key.private, algorithm=key.alg, headers={"kid": key.kid})


_REQUIRED = ["exp", "iat", "sub", "aud", "iss"]


class TokenVerifier:
    """Verifies tokens against the trusted public keys (by kid; several at once during a
    rotation), one audience and one issuer, allowing `leeway_s` of clock difference and
    at most `max_ttl_s` between iat and exp. ValueError when two keys share a kid or
    none is given."""

    def __init__(self, keys: Iterable[VerifyKey], audience: str, issuer: str, leeway_s: int = 5,
                 max_ttl_s: int = 86_400) -> None:
        self.replace_keys(keys)
        self.audience, self.issuer, self.leeway_s, self.max_ttl_s = audience, issuer, leeway_s, max_ttl_s

    def replace_keys(self, keys: Iterable[VerifyKey]) -> None:
        """Trust exactly `keys` from now on (a JWKS refresh: rotation by kid); ValueError
        as the constructor says, the old keys kept."""
        new: dict[str, VerifyKey] = {}
        for k in keys:
            if k.kid in new:
                raise ValueError(f"two token keys have the same kid {k.kid} (the same key listed twice?)")
            new[k.kid] = k
        if not new:
            raise ValueError("no token public key")
        self.keys = new

    def verify(self, token: str) -> VerifiedToken:
        """The identity and expiry of a valid token; TokenRefused(reason) otherwise."""
        return self.verify_named(token)[0]

    def verify_named(self, token: str) -> tuple[VerifiedToken, str]:
        """As `verify`, with the display name the token claims, checked and folded ("" when
        none): a login decodes its token once (`token_name` would decode it again)."""
        if not token or len(token) > TOKEN_MAX_BYTES:
            raise TokenRefused("malformed", "token is empty or too long")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenRefused("malformed", "token is not a JWT") from None
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in ALGORITHMS:
            raise TokenRefused("algorithm", f"token algorithm must be one of {', '.join(ALGORITHMS)}")
        key = self.keys.get(kid) if isinstance(kid, str) else None
        if key is None:
            raise TokenRefused("unknown_kid", "token is signed by a key this gateway does not trust (kid)")
        if alg != key.alg:
            raise TokenRefused("algorithm", f"token algorithm does not match its key ({key.alg})")
        try:
            claims = jwt.decode(token, key.public, algorithms=[key.alg], audience=self.audience, issuer=self.issuer,
                                leeway=self.leeway_s, options={"require": _REQUIRED})
        except jwt.ExpiredSignatureError:
            raise TokenRefused("expired", "token expired") from None
        except jwt.ImmatureSignatureError:
            raise TokenRefused("not_yet_valid", "token not yet valid") from None
        except jwt.InvalidAudienceError:
            raise TokenRefused("audience", "token is for another audience") from None
        except jwt.InvalidIssuerError:
            raise TokenRefused("issuer", "token is from another issuer") from None
        except jwt.InvalidSignatureError:
            raise TokenRefused("signature", "token signature is invalid") from None
        except (jwt.MissingRequiredClaimError, jwt.InvalidIssuedAtError):
            raise TokenRefused("claims", "token lacks a required claim or has a bad one") from None
        except jwt.PyJWTError:
            raise TokenRefused("malformed", "token could not be decoded") from None
        try:
            ident = _ids(claims)
        except ValueError:
            raise TokenRefused("claims", "token identity claims are missing or out of range") from None
        exp, iat = claims["exp"], claims["iat"]
        if not isinstance(exp, int) or not isinstance(iat, int) or exp - iat > self.max_ttl_s:
            raise TokenRefused("lifetime", f"token lives longer than {self.max_ttl_s} s")
        try:
            name = check_name(claims.get("name", ""))  # shown on other people's screens
        except ValueError as exc:
            raise TokenRefused("claims", f"token claim name is refused: {exc}") from None
        return VerifiedToken(ident.tenant, ident.user_id, ident.device_id, exp, iat), name


def load_verify_keys(paths: Iterable[str]) -> tuple[VerifyKey, ...]:
    """The public keys in the PEM files `paths` (blank entries ignored), in order.
    ValueError naming the file for an unreadable one, a private key, another key type,
    one key listed twice, or no path at all."""
    keys: dict[str, VerifyKey] = {}
    for path in (p.strip() for p in paths):
        if not path:
            continue
        try:
            key = VerifyKey.load(path)
        except OSError as exc:
            raise ValueError(f"cannot read {path}: {exc.strerror}") from None
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        if key.kid in keys:
            raise ValueError(f"{path} is the same key as another listed file (kid {key.kid})")
        keys[key.kid] = key
    if not keys:
        raise ValueError("lists no key file")
    return tuple(keys.values())
