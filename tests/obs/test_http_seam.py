"""The HTTP seam of a node (qim/obs/http.py, qim/obs/httpauth.py; docs/decisions/0111):
declared routes beside /metrics and /healthz on the metrics listener's HTTPS (the
development CA of qim/dev/certs.py), device-token authentication with the revocation
list on a real Redis, the body limit, the timeouts, errors as statuses with a reason,
and request metrics labelled by route template and status class, never by an id."""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
import time

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from qim.config.env import Env
from qim.config.tls import metrics_tls
from qim.dev.certs import ensure_dev_pki
from qim.errors import ConfigError
from qim.net.tls import server_context
from qim.obs import node as node_module
from qim.obs.http import serve_http
from qim.obs.httpauth import DeviceAuth
from qim.obs.node import ServiceNode
from qim.stores.revocations import open_revocations
from qim.topology import SERVICES, HttpRoute, Service
from qim.wire.tokens import SigningKey, TokenVerifier, issue_token

TENANT, USER, DEVICE = 7, 1001, 3
AUD = ISS = "qim-test"
KEY = SigningKey.generate()
ROUTES = (
    HttpRoute("POST", "/v1/media/{conv}", "upload", max_body=1024, timeout_s=5.0),
    HttpRoute("GET", "/v1/ping", "ping", token=False),
    HttpRoute("GET", "/v1/stall", "stall", token=False, timeout_s=0.5),
    HttpRoute("GET", "/v1/broken", "broken", token=False),
    HttpRoute("POST", "/v1/sink", "sink", token=False, timeout_s=0.5),
)


class Media:
    """The handlers a media service would have (the routes' `handler` names)."""

    async def upload(self, request: web.Request, device) -> web.Response:
        body = await request.read()
        return web.json_response(
            {"user": device.user_id, "device": device.device_id, "bytes": len(body), "conv": request.match_info["conv"]}
        )

    async def ping(self, request: web.Request, device) -> web.Response:
        return web.Response(text=f"pong {device}")

    async def stall(self, request: web.Request, device) -> web.Response:
        await asyncio.sleep(60)
        return web.Response(text="late")

    async def sink(self, request: web.Request, device) -> web.Response:
        return web.Response(text=f"{len(await request.read())} bytes")

    async def broken(self, request: web.Request, device) -> web.Response:
        raise RuntimeError("a bug in a handler")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return ensure_dev_pki(tmp_path_factory.mktemp("pki"))


def _tls(pki) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    served = pki.files("writer")
    files = metrics_tls(
        Env(
            {"QIM_METRICS_TLS_CERT": served.cert, "QIM_METRICS_TLS_KEY": served.key, "QIM_METRICS_CLIENT_CA": served.ca}
        ),
        "0.0.0.0:9101",
    )
    assert files is not None
    scraper = pki.files("qimctl")
    client = ssl.create_default_context(cafile=scraper.ca)
    client.check_hostname = False  # service certificates name a service URI, not a host
    client.load_cert_chain(scraper.cert, scraper.key)
    return server_context(files), client


def _token(key: SigningKey = KEY, **kw) -> str:
    kw.setdefault("ttl_s", 600)
    return issue_token(key, kw.pop("tenant", TENANT), USER, DEVICE, audience=AUD, issuer=ISS, **kw)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _serve(pki, auth=None, **kw):
    auth = auth or DeviceAuth(TokenVerifier([KEY.verify_key()], AUD, ISS), TENANT)
    server_tls, client_tls = _tls(pki)
    registry = CollectorRegistry()
    server = await serve_http(
        "127.0.0.1:0", lambda: [], registry, server_tls, routes=ROUTES, target=Media(), auth=auth, **kw
    )
    port = server.sockets[0].getsockname()[1]
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_tls))
    return server, session, f"https://127.0.0.1:{port}", client_tls, port


async def _close(server, session) -> None:
    await session.close()
    server.close()
    await server.wait_closed()


async def _get(session, method, url, **kw) -> tuple[int, str, dict]:
    async with session.request(method, url, **kw) as r:
        return r.status, await r.text(), dict(r.headers)


def _samples(text: str, name: str) -> dict[tuple, float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == name
    }


async def test_a_declared_route_takes_a_device_token_over_tls(pki, private_redis):
    revocations = open_revocations(private_redis.addr)
    auth = DeviceAuth(TokenVerifier([KEY.verify_key()], AUD, ISS), TENANT, revocations.cutoffs)
    server, session, base, _, _ = await _serve(pki, auth)
    url = f"{base}/v1/media/12345"
    try:
        status, body, _ = await _get(session, "POST", url, data=b"x" * 100, headers=_bearer(_token()))
        assert status == 200 and body == '{"user": 1001, "device": 3, "bytes": 100, "conv": "12345"}'
        status, body, headers = await _get(session, "POST", url, data=b"x")
        assert (status, body) == (401, "an Authorization: Bearer <device token> header is required\n")
        assert headers["WWW-Authenticate"].startswith("Bearer")
        assert (await _get(session, "POST", url, headers={"Authorization": "Basic dTpw"}))[:2] == (
            401,
            "the Authorization header must be: Bearer <device token>\n",
        )
        old = int(time.time()) - 3600
        assert (await _get(session, "POST", url, headers=_bearer(_token(now=old, ttl_s=60))))[:2] == (
            401,
            "token expired\n",
        )
        status, body, _ = await _get(session, "POST", url, headers=_bearer(_token(SigningKey.generate())))
        assert status == 401 and "does not trust" in body
        assert (await _get(session, "POST", url, headers=_bearer(_token(tenant=8))))[:2] == (
            401,
            "token is for another tenant\n",
        )
        issued = int(time.time())
        await revocations.revoke(TENANT, USER, DEVICE, issued, 600)
        assert (await _get(session, "POST", url, headers=_bearer(_token(now=issued))))[:2] == (
            403,
            "token revoked for this device: sign in again\n",
        )
        assert (await _get(session, "POST", url, headers=_bearer(_token(now=issued + 1))))[0] == 200
        private_redis.stop()  # the revocation list cannot be read: refused, not let in unchecked
        assert (await _get(session, "POST", url, headers=_bearer(_token(now=issued + 1))))[:2] == (
            503,
            "the revocation list cannot be read now; retry\n",
        )
        metrics = (await _get(session, "GET", f"{base}/metrics"))[1]
        refused = _samples(metrics, "qim_http_auth_refused_total")
        for reason in ("missing", "malformed", "expired", "unknown_kid", "tenant", "revoked", "unavailable"):
            assert refused[(("reason", reason),)] == 1.0, (reason, refused)
    finally:
        await _close(server, session)
        await revocations.close()


async def test_a_body_above_the_limit_is_413(pki):
    server, session, base, _, _ = await _serve(pki)
    url, headers = f"{base}/v1/media/1", _bearer(_token())
    try:
        assert (await _get(session, "POST", url, data=b"x" * 1024, headers=headers))[0] == 200
        assert (await _get(session, "POST", url, data=b"x" * 1025, headers=headers))[:2] == (
            413,
            "request body is 1025 bytes; at most 1024\n",
        )

        async def chunks():  # no Content-Length: refused when the handler reads past the limit
            for _ in range(8):
                yield b"y" * 512

        status, body, _ = await _get(session, "POST", url, data=chunks(), headers=headers)
        assert status == 413 and "1024" in body
    finally:
        await _close(server, session)


async def test_a_slow_client_is_cut_off(pki):
    server, session, base, client_tls, port = await _serve(pki, idle_timeout_s=1.0)
    try:
        assert (await _get(session, "GET", f"{base}/v1/stall"))[:2] == (408, "request not complete within 0.5 s\n")
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_tls)
        writer.write(b"GET /v1/ping HTTP/1.1\r\nHost: qim\r\n")  # the head never ends
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 30) == b""  # closed by the server, no answer
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_tls)
        writer.write(b"POST /v1/sink HTTP/1.1\r\nHost: qim\r\nContent-Length: 100\r\n\r\n" + b"z" * 10)
        await writer.drain()  # the rest of the body never comes
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        assert head.startswith(b"HTTP/1.1 408 ") and b"Content-Length: 34\r\n" in head
        assert await reader.readexactly(34) == b"request not complete within 0.5 s\n"
        writer.close()
    finally:
        await _close(server, session)


async def test_errors_are_statuses_and_metrics_carry_templates(pki, caplog):
    server, session, base, _, _ = await _serve(pki)
    try:
        assert (await _get(session, "GET", f"{base}/v1/ping"))[:2] == (200, "pong None")
        with caplog.at_level(logging.ERROR, logger="qim.obs.http"):
            assert (await _get(session, "GET", f"{base}/v1/broken"))[:2] == (500, "internal error\n")
        assert "GET /v1/broken failed" in caplog.text and "a bug in a handler" in caplog.text
        assert (await _get(session, "GET", f"{base}/v1/nothing/98765"))[:2] == (404, "not found\n")
        assert (await _get(session, "DELETE", f"{base}/v1/ping"))[0] == 405
        status, text, headers = await _get(session, "GET", f"{base}/metrics")
        assert status == 200 and headers["Content-Type"].startswith("text/plain")
        requests = _samples(text, "qim_http_requests_total")
        assert requests[(("method", "GET"), ("route", "/v1/ping"), ("status", "2xx"))] == 1.0
        assert requests[(("method", "GET"), ("route", "/v1/broken"), ("status", "5xx"))] == 1.0
        assert requests[(("method", "GET"), ("route", "other"), ("status", "4xx"))] == 1.0
        assert requests[(("method", "DELETE"), ("route", "other"), ("status", "4xx"))] == 1.0
        # the path asked for never becomes a label (a sample's value may hold the digits)
        assert not re.search(r'="[^"]*98765', text), text
    finally:
        await _close(server, session)


class RouteNode(ServiceNode):
    """A node of a row that declares one route (the row's `http` column)."""

    service = "hello"

    async def hello(self, request: web.Request, device) -> web.Response:
        return web.Response(text=f"hello {request.match_info['who']}")


async def test_a_node_serves_its_rows_routes_and_refuses_a_bad_declaration(monkeypatch):
    row = Service("hello", "Hello", "HELLO", http=(HttpRoute("GET", "/v1/hello/{who}", "hello", token=False),))
    monkeypatch.setattr(node_module, "SERVICES", {**SERVICES, "hello": row})
    node = RouteNode("127.0.0.1:0")
    await node.start()
    try:
        port = node._http.sockets[0].getsockname()[1]
        async with aiohttp.ClientSession() as s:
            assert (await _get(s, "GET", f"http://127.0.0.1:{port}/v1/hello/there"))[:2] == (200, "hello there")
            assert (await _get(s, "GET", f"http://127.0.0.1:{port}/healthz"))[:2] == (200, "ok\n")
    finally:
        await node.stop()
    bad = [
        (HttpRoute("GET", "/v1/x", "missing", token=False), "has no coroutine method 'missing'"),
        (HttpRoute("GET", "/v1/x", "ping"), "requires a device token but the node has no token verifier"),
        (HttpRoute("GET", "/metrics", "ping", token=False), "not ('/metrics', '/healthz')"),
    ]
    for route, why in bad:
        with pytest.raises(ConfigError, match=why.replace("(", r"\(").replace(")", r"\)")):
            await serve_http("127.0.0.1:0", lambda: [], CollectorRegistry(), routes=(route,), target=Media())
