"""Fixtures of the CLI tests: a development token key file and a dead loopback gateway."""

from __future__ import annotations

import socket

import pytest

from qim.wire.tokens import SigningKey


@pytest.fixture(scope="module")
def key_file(tmp_path_factory) -> str:
    """A development token key (Ed25519 PEM) file, as $QIM_DEV_TOKEN_KEY names one."""
    path = tmp_path_factory.mktemp("key") / "dev_token_key.pem"
    path.write_bytes(SigningKey.generate().private_pem())
    return str(path)


@pytest.fixture
def dead() -> str:
    """host:port of a loopback port that refuses connections (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def no_gateway_env(monkeypatch):
    """No gateway, key or CA from the environment: each test names its own."""
    for name in ("QIM_GATEWAY_ADDRS", "QIM_GATEWAY_ADDR", "QIM_DEV_TOKEN_KEY", "QIM_CA_FILE"):
        monkeypatch.delenv(name, raising=False)


def one_line(capsys, prefix: str) -> str:
    """The captured stderr, asserted to be exactly one line starting with `prefix` and no traceback."""
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith(prefix), err
    return err
