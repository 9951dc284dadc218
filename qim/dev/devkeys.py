"""The development token key of one stack directory (docs/decisions/0021; qim/wire/devtoken.py).

`dev_token_key(dir)` makes sure `dir/dev_token_key.pem` (Ed25519, PKCS#8 PEM, mode
0600: only `qimctl token`, qim-loadgen, qim-desktop, the examples and the tests read it,
through QIM_DEV_TOKEN_KEY) and its public half `dir/dev_token_pub.pem` (what the
stack's gateway trusts through QIM_TOKEN_PUBLIC_KEYS) exist. The key is generated once
and kept across `down`/`up`, so tokens a client holds stay valid (like the ports:
docs/decisions/0014). Key material is never printed or logged.
"""

from __future__ import annotations

import os
from pathlib import Path

from qim.errors import EngineError
from qim.wire.tokens import SigningKey

KEY_FILE = "dev_token_key.pem"
PUBLIC_FILE = "dev_token_pub.pem"


def _write(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def dev_token_key(dir: Path) -> tuple[Path, Path]:
    """(private key path, public key path) in `dir`, generating the key the first time.
    The public file is rewritten from the private key when missing or different.
    EngineError when the private key file is unreadable or not an Ed25519/P-256 key."""
    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=True)
    key_path, pub_path = dir / KEY_FILE, dir / PUBLIC_FILE
    if key_path.exists():
        try:
            key = SigningKey.load(key_path)
        except (OSError, ValueError) as exc:
            raise EngineError(f"{key_path} is not a usable private key ({exc}); remove it to generate a new "
                              f"development key (tokens made with the old one stop working)") from None
    else:
        key = SigningKey.generate("EdDSA")
        _write(key_path, key.private_pem(), 0o600)
    public = key.verify_key().public_pem()
    if not pub_path.exists() or pub_path.read_bytes() != public:
        _write(pub_path, public, 0o644)
    return key_path, pub_path
