"""Token keys of the development stack's gateways, so the key rotations of docs/operations.md
"Tokens and keys" (docs/decisions/0036-ops-tokens-jwks-revocation.md) can be tried on a
`qim-dev stack up` stack without starting a gateway by hand (issue 33 item 10):

    qim-dev stack up [--token-public-keys PEM[,PEM...]] [--token-jwks FILE|URL]
                     [--token-jwks-refresh-s S]

`--token-public-keys`: PEM public keys the gateways trust besides the stack's development
key (QIM_TOKEN_PUBLIC_KEYS is the development key's public half, then these);
`--token-jwks`: a JWKS document of keys by kid (QIM_TOKEN_JWKS), read again every
`--token-jwks-refresh-s` seconds (QIM_TOKEN_JWKS_REFRESH_S, 5..86400, default 300). A
flag given replaces what the running stack was started with, a flag omitted keeps it, an
empty value (`--token-jwks ""`) drops it. A stack running with other token settings is
restarted; a JWKS rotation itself needs no restart (edit the document, wait one refresh).
Bad values are EngineError (`qim-dev: error: …`, exit 2) before anything starts.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional

from qim.config import Env
from qim.dev.devkeys import dev_token_key
from qim.errors import ConfigError, EngineError

KEYS, JWKS, REFRESH = "QIM_TOKEN_PUBLIC_KEYS", "QIM_TOKEN_JWKS", "QIM_TOKEN_JWKS_REFRESH_S"
SETTINGS = (KEYS, JWKS, REFRESH)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The `stack up` flags of the module doc."""
    p.add_argument("--token-public-keys", default=None, metavar="PEM[,PEM...]",
                   help="up: PEM public keys the gateways trust besides the development key "
                        "(QIM_TOKEN_PUBLIC_KEYS; \"\" drops them)")
    p.add_argument("--token-jwks", default=None, metavar="FILE|URL",
                   help="up: a JWKS document of token keys by kid (QIM_TOKEN_JWKS; \"\" drops it)")
    p.add_argument("--token-jwks-refresh-s", type=int, default=None, metavar="S",
                   help="up: how often the gateways read the JWKS again (QIM_TOKEN_JWKS_REFRESH_S, 5..86400)")


def token_settings(args: argparse.Namespace, dir: Path, recorded: Optional[dict[str, str]]) -> dict[str, str]:
    """The token variables the stack's services get: from the flags, else from
    `recorded` (the running stack's env), the development key always first. EngineError
    for a key file that is not a public key, a JWKS file that does not exist or a
    refresh period out of range."""
    recorded = recorded or {}
    _, dev_public = dev_token_key(dir)
    dev = str(dev_public.resolve())
    if args.token_public_keys is not None:
        extra = [str(Path(p.strip()).resolve()) for p in args.token_public_keys.split(",") if p.strip()]
    else:
        extra = [p for p in recorded.get(KEYS, "").split(",") if p and p != dev]
    out = {KEYS: ",".join([dev, *extra])}
    try:
        Env(out).token_keys()  # every file a public key, kids distinct
    except ConfigError as exc:
        raise EngineError(f"--token-public-keys: {exc}") from None
    jwks = args.token_jwks if args.token_jwks is not None else recorded.get(JWKS, "")
    if jwks:
        if not jwks.startswith(("http://", "https://")):
            if not Path(jwks).is_file():
                raise EngineError(f"--token-jwks: {jwks} is not a file (a JWKS document, or an http(s) URL)")
            jwks = str(Path(jwks).resolve())
        out[JWKS] = jwks
    refresh = args.token_jwks_refresh_s
    if refresh is not None and not 5 <= refresh <= 86_400:
        raise EngineError(f"--token-jwks-refresh-s must be 5..86400, got {refresh}")
    refresh_text = str(refresh) if refresh is not None else recorded.get(REFRESH, "")
    if refresh_text:
        out[REFRESH] = refresh_text
    return out


def tokens_differ(stack_env: dict[str, str], wanted: dict[str, str]) -> bool:
    """Whether a recorded stack ran with other token settings than `wanted`."""
    return any(stack_env.get(k, "") != wanted.get(k, "") for k in SETTINGS)
