"""Fixtures of the browser tests (tests/web/harness.py): one Chromium for the session,
qim-web serving web/dist against the session `stack` (tests/fixtures.py, never
redefined here), and a factory of signed-in pages whose contexts close after the test.
web/dist must be built (`make web-build`, which `make test` runs first): a missing
build FAILS the tests, as a missing engine does.
"""

from __future__ import annotations

import os

import pytest

from qim.dev.webserver import serve
from tests.web.harness import CHROMIUM, CHROMIUM_ARGS, DIST, WebPage


def gateway_ws_url(stack) -> str:
    """The stack gateway's development WebSocket URL (`QIM_GATEWAY_WS_ADDR`, ws://: the
    page's Chromium would not trust the dev CA of wss://); a stack without one FAILS."""
    url = stack.client_env().get("QIM_GATEWAY_WS_ADDR", "")
    if not url.startswith("ws://"):
        pytest.fail("the stack's gateway has no ws:// listener (QIM_GATEWAY_WS_ADDR)", pytrace=False)
    return url


@pytest.fixture(scope="package")
def web_url(stack):
    """qim-web on a free loopback port, against the session stack's gateway."""
    if not (DIST / "index.html").is_file():
        pytest.fail(f"{DIST}/index.html is missing: run `make web-build`", pytrace=False)
    httpd = serve("127.0.0.1", 0, DIST, gateway_ws_url(stack), stack.token_key)
    yield f"http://127.0.0.1:{int(httpd.server_address[1])}/"
    httpd.shutdown()


@pytest.fixture(scope="package")
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
