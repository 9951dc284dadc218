"""TLS variables (qim/config/tls.py): certificates are required unless the
explicit development flag is set AND every address is loopback; each refusal names the
variable; an unreadable certificate stops the node with a ConfigError naming it."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from qim.config import Env, GatewayConfig, MailboxConfig, SessionConfig, WriterConfig
from qim.dev.certs import CLIENT_PORT, ensure_dev_pki
from qim.errors import ConfigError

BASE = {"QIM_REDIS_ADDR": "127.0.0.1:6379", "QIM_KAFKA_BOOTSTRAP": "127.0.0.1:9092"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    # the gateway also needs a token public key (QIM_TOKEN_PUBLIC_KEYS): any P-256 public key
    key = ec.generate_private_key(ec.SECP256R1()).public_key()
    (d / "token.pub").write_bytes(key.public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo))
    BASE["QIM_TOKEN_PUBLIC_KEYS"] = str(d / "token.pub")
    return ensure_dev_pki(d)


def internal(pki, service: str) -> dict[str, str]:
    return pki.service_env(service)


def refused(build, **env: str) -> str:
    with pytest.raises(ConfigError) as exc:
        build(Env({**BASE, **env}))
    return str(exc.value)


def test_without_certificates_or_the_flag_no_service_starts(pki):
    msg = refused(WriterConfig.from_env)
    assert "QIM_INTERNAL_CA, QIM_INTERNAL_TLS_CERT, QIM_INTERNAL_TLS_KEY required" in msg
    assert "QIM_INTERNAL_PLAINTEXT_DEV=1" in msg
    msg = refused(GatewayConfig.from_env, QIM_INTERNAL_PLAINTEXT_DEV="1")
    assert "QIM_GATEWAY_TLS_CERT and QIM_GATEWAY_TLS_KEY are required" in msg


def test_plaintext_only_on_loopback_addresses_named(pki):
    gw_tls = {"QIM_GATEWAY_TLS_CERT": pki.files(CLIENT_PORT).cert, "QIM_GATEWAY_TLS_KEY": pki.files(CLIENT_PORT).key}
    msg = refused(GatewayConfig.from_env, QIM_GATEWAY_PLAINTEXT_DEV="1", QIM_GATEWAY_LISTEN="0.0.0.0:7100",
                  QIM_INTERNAL_PLAINTEXT_DEV="1")
    assert msg == "QIM_GATEWAY_PLAINTEXT_DEV=1 requires loopback addresses; QIM_GATEWAY_LISTEN has 0.0.0.0"
    # the internal flag looks at every address the process listens on or dials
    msg = refused(GatewayConfig.from_env, **gw_tls, QIM_INTERNAL_PLAINTEXT_DEV="1",
                  QIM_WRITER_ADDRS="127.0.0.1:7101,10.0.0.7:7101")
    assert msg == "QIM_INTERNAL_PLAINTEXT_DEV=1 requires loopback addresses; QIM_WRITER_ADDRS has 10.0.0.7"
    msg = refused(MailboxConfig.from_env, QIM_INTERNAL_PLAINTEXT_DEV="1", QIM_SESSION_ADDRS="[2001:db8::1]:7103")
    assert "QIM_SESSION_ADDRS has 2001:db8::1" in msg
    msg = refused(SessionConfig.from_env, QIM_INTERNAL_PLAINTEXT_DEV="1", QIM_SESSION_LISTEN="192.0.2.1:7103")
    assert "QIM_SESSION_LISTEN has 192.0.2.1" in msg
    # loopback in every spelling is fine
    for listen in ("[::1]:7101", "localhost:7101", "127.0.0.2:7101"):
        writer = WriterConfig.from_env(Env({**BASE, "QIM_INTERNAL_PLAINTEXT_DEV": "1", "QIM_WRITER_LISTEN": listen}))
        assert writer.internal_tls is None


def test_a_flag_and_certificates_together_is_ambiguous(pki):
    msg = refused(WriterConfig.from_env, QIM_INTERNAL_PLAINTEXT_DEV="1", **internal(pki, "writer"))
    assert "QIM_INTERNAL_PLAINTEXT_DEV=1 and QIM_INTERNAL_CA/TLS_CERT/TLS_KEY are both set" in msg


def test_certificate_files_are_checked_by_name(pki, tmp_path):
    files = internal(pki, "writer")
    msg = refused(WriterConfig.from_env, **{**files, "QIM_INTERNAL_TLS_KEY": str(tmp_path / "missing.key")})
    assert msg.startswith("QIM_INTERNAL_TLS_KEY=") and "no such readable file" in msg
    cfg = WriterConfig.from_env(Env({**BASE, **files}))
    assert cfg.internal_tls is not None and cfg.internal_tls.ca == pki.ca_file


def test_a_certificate_that_does_not_load_stops_the_node_naming_the_variables(pki, tmp_path):
    from qim.services.writer.server import ConversationWriter

    bad = tmp_path / "bad.crt"
    bad.write_text("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
    cfg = WriterConfig.from_env(Env({**BASE, **internal(pki, "writer"), "QIM_INTERNAL_TLS_CERT": str(bad)}))
    with pytest.raises(ConfigError, match="QIM_INTERNAL_CA/TLS_CERT/TLS_KEY: server: cannot load certificate"):
        ConversationWriter(cfg)
    # a key that is not the certificate's
    cfg = WriterConfig.from_env(Env({**BASE, **internal(pki, "writer"),
                                     "QIM_INTERNAL_TLS_KEY": pki.files("mailbox").key}))
    with pytest.raises(ConfigError, match="KEY_VALUES_MISMATCH|key values mismatch"):
        ConversationWriter(cfg)
