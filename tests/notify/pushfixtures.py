"""The providers, each started against its local endpoint (tests/notify/fakes), as
fixtures: `apns` -> (ApnsProvider, FakeApns), `fcm` -> (FcmProvider, FakeFcm), `webpush`
-> (WebPushProvider, FakePushService, a subscription). Every provider has a 1.5 s timeout
and the test's hand-moved clock."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from qim.notify.providers.apns import ApnsConfig, ApnsProvider
from qim.notify.providers.fcm import FcmConfig, FcmProvider
from qim.notify.providers.webpush import VapidConfig, WebPushProvider
from tests.notify.fakes.apns import FakeApns
from tests.notify.fakes.fcm import FakeFcm
from tests.notify.fakes.webpush import FakePushService, raw_public

TEAM, KEY_ID, TOPIC = "TEAM123456", "KEY1234567", "com.example.qim"
PROJECT, EMAIL = "qim-test", "push@qim-test.iam.gserviceaccount.com"
SUBJECT = "mailto:ops@example.com"


def apns_keys() -> tuple[str, str]:
    """(the .p8 private key, its public key), PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    p8 = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                           serialization.NoEncryption()).decode()
    pub = key.public_key().public_bytes(serialization.Encoding.PEM,
                                        serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return p8, pub


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
