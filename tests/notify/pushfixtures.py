"""What the push-provider tests share besides fixtures (tests/notify/conftest.py defines
those: a conftest may not import one, tests/test_fixtures_defined_once.py): the
credentials' names and a fresh APNs key pair."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

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
