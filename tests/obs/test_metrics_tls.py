"""/metrics and /healthz behind TLS (qim/config/tls.py `metrics_tls`, qim/obs/http.py):
HTTPS with TLS 1.3 and client certificates of the internal CA when a process is given a
certificate, plain HTTP only on a loopback address otherwise (docs/operations.md
"Metrics"). The development CA of qim/dev/certs.py stands in for the internal CA."""

from __future__ import annotations

import asyncio
import ssl
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, Counter

from qim.config.env import Env
from qim.config.tls import metrics_tls
from qim.dev.certs import ensure_dev_pki
from qim.errors import ConfigError
from qim.net.tls import server_context
from qim.obs.http import serve_http


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return ensure_dev_pki(tmp_path_factory.mktemp("pki"))


def _get(url: str, ctx: ssl.SSLContext | None) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5, context=ctx) as r:
        return r.status, r.read().decode()


async def test_https_metrics_need_a_client_certificate_of_the_ca(pki):
    served = pki.files("writer")
    files = metrics_tls(Env({"QIM_METRICS_TLS_CERT": served.cert, "QIM_METRICS_TLS_KEY": served.key,
                             "QIM_METRICS_CLIENT_CA": served.ca}), "0.0.0.0:9101")
    assert files is not None
    registry = CollectorRegistry()
    Counter("qim_probe", "probe", registry=registry).inc()
    server = await serve_http("127.0.0.1:0", lambda: [], registry, server_context(files))
    port = server.sockets[0].getsockname()[1]
    try:
        scraper = pki.files("qimctl")  # any certificate of the internal CA (a `prometheus` one in production)
        ctx = ssl.create_default_context(cafile=scraper.ca)
        ctx.check_hostname = False  # service certificates name a service URI, not a host
        ctx.load_cert_chain(scraper.cert, scraper.key)
        status, body = await asyncio.to_thread(_get, f"https://127.0.0.1:{port}/metrics", ctx)
        assert status == 200 and "qim_probe_total 1.0" in body
        assert (await asyncio.to_thread(_get, f"https://127.0.0.1:{port}/healthz", ctx)) == (200, "ok\n")
        bare = ssl.create_default_context(cafile=scraper.ca)
        bare.check_hostname = False
        with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
            await asyncio.to_thread(_get, f"https://127.0.0.1:{port}/metrics", bare)  # no client certificate
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/metrics", None)  # no plaintext on it
    finally:
        server.close()
        await server.wait_closed()


def test_plain_http_only_on_loopback():
    assert metrics_tls(Env({}), "127.0.0.1:9100") is None
    with pytest.raises(ConfigError, match="0.0.0.0:9100 is not loopback"):
        metrics_tls(Env({}), "0.0.0.0:9100")


def test_certificate_and_key_go_together(pki):
    with pytest.raises(ConfigError, match="go together"):
        metrics_tls(Env({"QIM_METRICS_TLS_CERT": pki.files("writer").cert}), "127.0.0.1:9101")
