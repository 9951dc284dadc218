"""The providers' configurations refuse what cannot work with a ConfigError that says
why (docs/decisions/0130; the NotificationService exits 2 with it)."""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from qim.errors import ConfigError
from qim.notify.providers.apns import ApnsConfig, ApnsProvider
from qim.notify.providers.fcm import FcmConfig, load_service_account
from qim.notify.providers.webpush import VapidConfig, WebPushProvider


def test_apns_refuses_a_missing_field_a_bad_refresh_and_a_non_ec_key() -> None:
    with pytest.raises(ConfigError, match="team id"):
        ApnsConfig("", "K", "pem", "topic")
    with pytest.raises(ConfigError, match="refresh_s"):
        ApnsConfig("T", "K", "pem", "topic", refresh_s=3600)
    with pytest.raises(ConfigError, match="not a PEM"):
        ApnsProvider(ApnsConfig("T", "K", "not a key", "topic"))
    rsa_pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    with pytest.raises(ConfigError, match="P-256"):
        ApnsProvider(ApnsConfig("T", "K", rsa_pem, "topic"))


def test_fcm_refuses_an_incomplete_or_unreadable_service_account(tmp_path) -> None:
    with pytest.raises(ConfigError, match="lacks private_key, token_uri"):
        FcmConfig({"project_id": "p", "client_email": "e"})
    with pytest.raises(ConfigError, match="FileNotFoundError"):
        load_service_account(str(tmp_path / "none.json"))
    (tmp_path / "user.json").write_text(json.dumps({"type": "authorized_user"}))
    with pytest.raises(ConfigError, match="not a service_account"):
        load_service_account(str(tmp_path / "user.json"))


def test_vapid_refuses_a_bad_subject_and_a_bad_key() -> None:
    with pytest.raises(ConfigError, match="subject"):
        VapidConfig("pem", "ops@example.com")
    with pytest.raises(ConfigError, match="VAPID private key"):
        WebPushProvider(VapidConfig("-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----", "mailto:a@b.c"))
