"""Fixtures of the push-provider tests: a development CA and a loopback server
certificate (qim/dev/certs.py) per test, the fakes' TLS context, and a clock tests move
by hand (token lifetimes without sleeping); the providers against their local endpoints
`apns` -> (ApnsProvider, FakeApns), `fcm` -> (FcmProvider, FakeFcm), `webpush` ->
(WebPushProvider, FakePushService, a subscription), each with a 1.5 s timeout."""

from __future__ import annotations

import ssl
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from qim.dev.certs import CLIENT_PORT, ensure_dev_pki
from qim.notify.providers.apns import ApnsConfig, ApnsProvider
from qim.notify.providers.fcm import FcmConfig, FcmProvider
from qim.notify.providers.webpush import VapidConfig, WebPushProvider
from tests.notify.fakes.apns import FakeApns
from tests.notify.fakes.fcm import FakeFcm
from tests.notify.fakes.webpush import FakePushService, raw_public
from tests.notify.pushfixtures import EMAIL, KEY_ID, PROJECT, SUBJECT, TEAM, TOPIC, apns_keys


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


@pytest.fixture
async def apns(tls, clock):
    p8, pub = apns_keys()
    fake = await FakeApns(pub, KEY_ID, TEAM, TOPIC, tls.server, clock=clock).start()
    provider = ApnsProvider(ApnsConfig(TEAM, KEY_ID, p8, TOPIC, base_url=fake.base_url, ca_file=tls.ca_file,
                                       timeout_s=1.5), clock=clock)
    await provider.start()
    yield provider, fake
    await provider.close()
    await fake.stop()


@pytest.fixture
async def fcm(tls, clock):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    pub = key.public_key().public_bytes(serialization.Encoding.PEM,
                                        serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    fake = FakeFcm(tls.server, PROJECT, EMAIL, pub)
    fake.clock = clock
    await fake.start()
    account = {"type": "service_account", "project_id": PROJECT, "client_email": EMAIL, "private_key": pem,
               "private_key_id": "k1", "token_uri": fake.token_uri}
    provider = FcmProvider(FcmConfig(account, base_url=fake.base_url, ca_file=tls.ca_file, timeout_s=1.5),
                           clock=clock)
    await provider.start()
    yield provider, fake
    await provider.close()
    await fake.stop()


@pytest.fixture
async def webpush(tls, clock):
    vapid = ec.generate_private_key(ec.SECP256R1())
    pem = vapid.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()).decode()
    fake = await FakePushService(tls.server).start()
    subscription = fake.subscribe(raw_public(vapid))
    provider = WebPushProvider(VapidConfig(pem, SUBJECT, ca_file=tls.ca_file, timeout_s=1.5), clock=clock)
    await provider.start()
    yield provider, fake, subscription
    await provider.close()
    await fake.stop()


@pytest.fixture(scope="module")
def apns_endpoint(tmp_path_factory):
    """A local APNs endpoint in a thread of its own (tests/notify/servicefakes.py), for a
    module's NotificationService."""
    from tests.notify.servicefakes import ThreadedApns

    server = ThreadedApns().start(tmp_path_factory.mktemp("apns"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def push_stack(tmp_path_factory, apns_endpoint):
    """A private stack with two qim-notify nodes sending to `apns_endpoint` (claims of 3 s)."""
    from tests.fixtures import running_stack

    env = {**apns_endpoint.env, "QIM_NOTIFY_CLAIM_MS": "3000"}
    with running_stack(tmp_path_factory.mktemp("notify"), extra_env=env, nodes={"notify": 2}) as st:
        yield st
