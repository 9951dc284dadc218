"""Fixtures of the push-provider tests: a development CA and a loopback server
certificate (qim/dev/certs.py) per test, the fakes' TLS context, and a clock tests move
by hand (token lifetimes without sleeping); the providers against their local endpoints
(pushfixtures.py)."""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from qim.dev.certs import CLIENT_PORT, ensure_dev_pki
from tests.notify.pushfixtures import apns, fcm, webpush  # noqa: F401


@dataclass
class Tls:
    """`server`: the fakes' TLS context; `ca_file`: the CA a provider must trust."""

    server: ssl.SSLContext
    ca_file: str


@pytest.fixture
def tls(tmp_path: Path) -> Tls:
    pki = ensure_dev_pki(tmp_path / "pki", services=())
    files = pki.files(CLIENT_PORT)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(files.cert, files.key)
    return Tls(server, pki.ca_file)


class Clock:
    """Unix seconds that start at the real time and move only by `advance`."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()
