"""qim-web (qim/dev/webserver.py): the page's files, its config, development tokens
for valid ids only, nothing outside the build directory, loopback only."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from qim.dev.devkeys import dev_token_key
from qim.dev.webserver import serve
from qim.wire.devtoken import token_claims


@pytest.fixture
def site(tmp_path):
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / "index.html").write_text("<!doctype html><title>QIM</title>")
    (tmp_path / "secret.txt").write_text("outside")
    key, _ = dev_token_key(tmp_path / "keys")
    httpd = serve("127.0.0.1", 0, dist, "ws://127.0.0.1:1/qim", str(key))
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def get(url: str, data: bytes | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_serves_the_page_and_its_config(site):
    assert get(site + "/") == (200, b"<!doctype html><title>QIM</title>")
    status, body = get(site + "/config.json")
    assert status == 200 and json.loads(body) == {"gateway": "ws://127.0.0.1:1/qim", "gateways": ["ws://127.0.0.1:1/qim"],
                                                  "deployment": "ws://127.0.0.1:1/qim", "devTokens": True}
    assert get(site + "/../secret.txt")[0] == 404
    assert get(site + "/%2e%2e/secret.txt")[0] == 404


def test_dev_tokens_for_valid_ids_only(site):
    status, body = get(site + "/api/dev-token", json.dumps({"user": "9007199254740993", "device": "7"}).encode())
    assert status == 200
    claims = token_claims(json.loads(body)["token"])
    assert (claims.user_id, claims.device_id) == (9007199254740993, 7)  # exact: ids travel as strings
    for bad in [{"user": "0", "device": "1"}, {"user": "1", "device": str(1 << 63)}, {"user": "1e3", "device": "1"},
                {"user": "1", "device": "1", "name": "x" * 65}, {"user": "1", "device": "1", "name": "a\u0000b"},
                [1, 2]]:
        status, body = get(site + "/api/dev-token", json.dumps(bad).encode())
        assert status == 400 and json.loads(body)["error"]
    assert get(site + "/api/dev-token", b"{not json")[0] == 400


def test_loopback_only(tmp_path):
    (tmp_path / "index.html").write_text("x")
    with pytest.raises(ValueError, match="loopback"):
        serve("0.0.0.0", 0, tmp_path, "ws://127.0.0.1:1/", None)


def test_every_gateway_goes_to_the_page_in_order(tmp_path):
    """Issue 34 item 2 (docs/decisions/0082): the page gets every gateway's WebSocket URL
    to fail over, and names its store after the first (the deployment)."""
    (tmp_path / "index.html").write_text("x")
    two = "ws://127.0.0.1:1/qim/ws, ws://127.0.0.1:2/qim/ws"
    httpd = serve("127.0.0.1", 0, tmp_path, two, None)
    try:
        status, body = get(f"http://127.0.0.1:{httpd.server_address[1]}/config.json")
    finally:
        httpd.shutdown()
    got = json.loads(body)
    assert status == 200 and got["gateways"] == ["ws://127.0.0.1:1/qim/ws", "ws://127.0.0.1:2/qim/ws"]
    assert got["gateway"] == got["deployment"] == "ws://127.0.0.1:1/qim/ws"
    with pytest.raises(ValueError, match="not a ws://"):
        serve("127.0.0.1", 0, tmp_path, "ws://127.0.0.1:1/qim/ws,127.0.0.1:2", None)


def test_the_stacks_deployment_names_the_pages_store(tmp_path):
    """The development stack keeps its deployment name when its gateway's port moves
    (decision 0150): the page's store follows that name, not the gateway's URL, so a
    moved port does not empty the page's store."""
    (tmp_path / "index.html").write_text("x")
    httpd = serve("127.0.0.1", 0, tmp_path, "ws://127.0.0.1:43121/qim/ws", None, deployment="127.0.0.1:7100")
    try:
        status, body = get(f"http://127.0.0.1:{httpd.server_address[1]}/config.json")
    finally:
        httpd.shutdown()
    got = json.loads(body)
    assert status == 200 and got["deployment"] == "127.0.0.1:7100" and got["gateway"].endswith(":43121/qim/ws")
