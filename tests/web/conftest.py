"""Fixtures of the browser tests (tests/web/harness.py): one Chromium for the session,
qim-web serving web/dist against the session `stack` (tests/fixtures.py, never
redefined here), and a factory of signed-in pages whose contexts close after the test.
web/dist must be built (`make web-build`, which `make test` runs first): a missing
build FAILS the tests, as a missing engine does.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from qim.dev.webserver import serve
from tests.web.harness import CHROMIUM, CHROMIUM_ARGS, DIST, WebPage


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gateway_ws_url(stack) -> tuple[str, object]:
    """The stack gateway's WebSocket URL, and a process to stop (or None). A stack whose
    gateway has no WebSocket listener at all gets tests/web/wsbridge.py in front of its
    TLS port (said on stderr); one that has a listener but no ws:// URL here FAILS."""
    env = {**stack.env, **stack.client_env()}
    # the plain development listener: Chromium would not trust the dev CA of wss://
    url = env.get("QIM_GATEWAY_WS_ADDR") or next((v for v in env.values() if v.startswith("ws://")), "")
    if url:
        return url, None
    if any("WEBSOCKET" in k or "_WS_" in k or k.endswith("_WS") for k in env):
        pytest.fail("the stack's gateway listens for WebSockets but names no ws:// URL (QIM_GATEWAY_WS_ADDR)",
                    pytrace=False)
    port = _free_port()
    penv = {**os.environ, "QIM_GATEWAY_ADDR": stack.gateway_addr, "QIM_CA_FILE": stack.ca_file or ""}
    proc = subprocess.Popen([sys.executable, "-m", "tests.web.wsbridge", str(port)], env=penv,
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("wsbridge:"):
        proc.kill()
        pytest.fail(f"tests/web/wsbridge.py did not start: {line!r}", pytrace=False)
    print(f"\ntests/web: the stack's gateway has no WebSocket listener; using {line.strip()}", file=sys.stderr)
    return f"ws://127.0.0.1:{port}/", proc


@pytest.fixture(scope="session")
def web_url(stack):
    """qim-web on a free loopback port, against the session stack's gateway."""
    if not (DIST / "index.html").is_file():
        pytest.fail(f"{DIST}/index.html is missing: run `make web-build`", pytrace=False)
    url, proc = gateway_ws_url(stack)
    httpd = serve("127.0.0.1", 0, DIST, url, stack.token_key)
    yield f"http://127.0.0.1:{int(httpd.server_address[1])}/"
    httpd.shutdown()
    if proc is not None:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium, headless, through Playwright (no browser download)."""
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: run `make web-tools` (apt-get install chromium)", pytrace=False)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def pages(browser, web_url):
    """`pages(user, name="", device=None, context=None)` → a signed-in WebPage; a new
    browser context each unless `context` (a WebPage whose context to share: another
    tab of the same browser profile, with its own sessionStorage and so its own device)."""
    contexts = []

    def make(user: int, name: str = "", device=None, context: WebPage | None = None) -> WebPage:
        ctx = context.page.context if context is not None else browser.new_context(viewport={"width": 760, "height": 620})
        if context is None:
            contexts.append(ctx)
        page = WebPage(ctx.new_page(), user)
        page.page.set_default_timeout(30_000)
        return page.sign_in(web_url, name, device)

    yield make
    for ctx in contexts:
        ctx.close()
