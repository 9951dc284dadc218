"""qim-web and Web Push (docs/decisions/0143): /config.json carries the VAPID public key
derived from QIM_PUSH_VAPID_PRIVATE_KEY_FILE (only the public point), a key that is not
P-256 stops qim-web with exit 2 and one line, and /sw.js is served as JavaScript (a
browser refuses to register a service worker of another MIME type)."""

from __future__ import annotations

import base64
import json
import urllib.request

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from qim.dev.webserver import main, serve, vapid_public_key
from qim.errors import ConfigError


def pem_of(key) -> str:
    """A private key as unencrypted PKCS#8 PEM."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def test_the_public_point_of_a_p256_key_and_refusals():
    key = ec.generate_private_key(ec.SECP256R1())
    raw = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    got = vapid_public_key(pem_of(key))
    assert base64.urlsafe_b64decode(got + "=" * (-len(got) % 4)) == raw and "=" not in got
    with pytest.raises(ConfigError, match="not a P-256 key"):
        vapid_public_key(pem_of(ec.generate_private_key(ec.SECP384R1())))
    with pytest.raises(ConfigError, match="not a P-256 key"):
        vapid_public_key(pem_of(rsa.generate_private_key(public_exponent=65537, key_size=2048)))
    with pytest.raises(ConfigError, match="not a PEM key"):
        vapid_public_key("-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n")


def test_config_carries_the_key_and_sw_js_is_javascript(tmp_path):
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "index.html").write_text("<!doctype html>")
    (dist / "sw.js").write_text("self.addEventListener('push', () => {});")
    with_key = serve("127.0.0.1", 0, dist, "ws://127.0.0.1:1/qim", None, vapid_public="BKEY")
    without = serve("127.0.0.1", 0, dist, "ws://127.0.0.1:1/qim", None)
    try:
        def config(httpd) -> dict:
            return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{httpd.server_address[1]}/config.json",
                                                     timeout=10).read())
        assert config(with_key)["vapidPublicKey"] == "BKEY"
        assert "vapidPublicKey" not in config(without)
        with urllib.request.urlopen(f"http://127.0.0.1:{with_key.server_address[1]}/sw.js", timeout=10) as r:
            assert r.headers["Content-Type"] in ("text/javascript", "application/javascript")
    finally:
        with_key.shutdown()
        without.shutdown()


def test_a_key_that_is_not_p256_stops_qim_web(tmp_path, monkeypatch, capsys):
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "index.html").write_text("<!doctype html>")
    bad = tmp_path / "vapid.pem"
    bad.write_text(pem_of(ec.generate_private_key(ec.SECP384R1())))
    monkeypatch.setenv("QIM_PUSH_VAPID_PRIVATE_KEY_FILE", str(bad))
    assert main(["--gateway-ws", "ws://127.0.0.1:1/qim", "--dist", str(dist), "--port", "0"]) == 2
    assert capsys.readouterr().err.strip() == "qim-web: the VAPID private key is not a P-256 key"
    monkeypatch.setenv("QIM_PUSH_VAPID_PRIVATE_KEY_FILE", str(tmp_path / "missing.pem"))
    assert main(["--gateway-ws", "ws://127.0.0.1:1/qim", "--dist", str(dist), "--port", "0"]) == 2
    assert "missing.pem" in capsys.readouterr().err
