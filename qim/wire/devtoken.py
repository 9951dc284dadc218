"""Development tokens: signed JWTs from the development key (docs/decisions/0021; qim/wire/tokens.py).

Used by `qimctl token`, qim-loadgen, qim-desktop, the SDK examples and the tests. The
development stack generates one Ed25519 key per stack directory (qim/dev/devkeys.py):
the private key `.qim/stack/dev_token_key.pem` (mode 0600) whose path stack.env gives
as QIM_DEV_TOKEN_KEY, and its public half, which the stack's gateway trusts through
QIM_TOKEN_PUBLIC_KEYS. Development tokens always carry `iss` = "qim-dev"
(TOKEN_ISSUER_DEFAULT) and live DEV_TOKEN_TTL_S (1 h) unless asked otherwise; a
production gateway trusts neither the key nor, with its own QIM_TOKEN_ISSUER, the issuer.

Migration from the HMAC `dev1.` tokens (QIM_DEV_TOKEN_SECRET, gone): `issue_dev_token`
keeps its argument order but takes the key (a SigningKey or the path of its PEM file)
where it took the secret bytes; bytes are refused with a message saying so.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Mapping, Optional, Union

from qim.consts import DEV_TOKEN_TTL_S, TOKEN_AUDIENCE_DEFAULT, TOKEN_ISSUER_DEFAULT
from qim.wire.tokens import SigningKey, TokenClaims, issue_token, token_claims, token_expiry

KEY_ENV = "QIM_DEV_TOKEN_KEY"
AUDIENCE_ENV = "QIM_TOKEN_AUDIENCE"
DEV_ISSUER = TOKEN_ISSUER_DEFAULT
KeyLike = Union[SigningKey, str, os.PathLike]

__all__ = ["AUDIENCE_ENV", "DEV_ISSUER", "KEY_ENV", "TokenClaims", "dev_key_from_env", "issue_dev_token",
           "load_dev_key", "token_claims", "token_expiry"]


@lru_cache(maxsize=16)
def _load(path: str, mtime_ns: int) -> SigningKey:
    return SigningKey.load(path)


def load_dev_key(key: KeyLike) -> SigningKey:
    """The SigningKey itself, or the one in the PEM file at `key` (read once per file
    version). ValueError (one line) when the file is missing or holds no private key;
    TypeError for bytes (an old HMAC secret)."""
    if isinstance(key, SigningKey):
        return key
    if isinstance(key, (bytes, bytearray)):
        raise TypeError("development tokens are signed with the dev key now: pass its path ($QIM_DEV_TOKEN_KEY) "
                        "or a SigningKey, not an HMAC secret")
    path = os.fspath(key)
    try:
        return _load(path, os.stat(path).st_mtime_ns)
    except OSError as exc:
        raise ValueError(f"cannot read the development token key {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def dev_key_from_env(explicit: Optional[str] = None, environ: Optional[Mapping[str, str]] = None) -> SigningKey:
    """The development key from `explicit` (a path), else $QIM_DEV_TOKEN_KEY. ValueError
    (one line) when neither is set or the file is not a private key."""
    env = os.environ if environ is None else environ
    path = explicit or env.get(KEY_ENV, "")
    if not path:
        raise ValueError(f"no development token key: pass --key or set {KEY_ENV} "
                         f"(`set -a; . .qim/stack/stack.env; set +a` after `make up`)")
    return load_dev_key(Path(path))


def issue_dev_token(key: KeyLike, tenant: int, user_id: int, device_id: int, ttl_s: int = DEV_TOKEN_TTL_S,
                    audience: Optional[str] = None, now: Optional[int] = None, name: str = "") -> str:
    """A development token for (tenant u128, user u64 > 0, device u64 > 0) signed with
    the dev key, valid `ttl_s` seconds from `now` (unix seconds, default the current
    time) for `audience` (default $QIM_TOKEN_AUDIENCE, else "qim"), claiming the display
    `name` when given. ValueError on bad ids, ttl, name or key file; TypeError for an
    HMAC secret."""
    aud = audience or os.environ.get(AUDIENCE_ENV) or TOKEN_AUDIENCE_DEFAULT
    return issue_token(load_dev_key(key), tenant, user_id, device_id, audience=aud, issuer=DEV_ISSUER, ttl_s=ttl_s,
                       now=now, name=name)
