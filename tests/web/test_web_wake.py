"""Wake-up signals (issue 34 item 7; docs/decisions/0084): the tab's connection is
frozen the way a sleeping laptop's is (tests/web/freezeproxy.py: no FIN, no RST), a
peer writes, and the page gets a wake signal (the network offline → online through
DevTools, the tab shown again, a frozen page resumed): the page probes at once
(a PING answered within 2 s or the connection is given up) and shows the message
within a few seconds, not after the heartbeat (30 s here) gives up."""

from __future__ import annotations

import pytest

from qim.dev.webserver import serve
from tests.web.conftest import gateway_ws_url
from tests.web.freezeproxy import FreezeProxy
from tests.web.harness import DIST, WebPage, new_user

WITHIN_MS = 10_000  # probe 2 s + reconnect and sync on a loaded machine; the heartbeat alone takes 30 s+


@pytest.fixture
def frozen_web(stack):
    """(proxy, url): qim-web whose page dials the stack's gateway through a FreezeProxy."""
    ws = gateway_ws_url(stack)
    hostport = ws.split("//", 1)[1].split("/", 1)[0]
    proxy = FreezeProxy(hostport)
    httpd = serve("127.0.0.1", 0, DIST, ws.replace(hostport, proxy.addr), stack.token_key)
    yield proxy, f"http://127.0.0.1:{int(httpd.server_address[1])}/"
    httpd.shutdown()
    proxy.close()


def _preview_is(page: WebPage, text: str) -> None:
    """Wait until the list's newest preview ends with `text`; AssertionError with what it shows."""
    try:
        page.page.wait_for_function("t => document.querySelector('[data-testid=last-message]')?.textContent"
                                    ".endsWith(t)", arg=text, timeout=WITHIN_MS)
    except Exception as exc:  # Playwright's TimeoutError: say what the page showed instead
        if "Timeout" not in type(exc).__name__:
            raise
        shown = page.page.text_content("[data-testid=last-message]")
        raise AssertionError(f"{text!r} not shown within {WITHIN_MS} ms of the wake signal: the preview is "
                             f"{shown!r}, the page is {page.state()!r}, {len(page.sockets)} socket(s) opened; "
                             "console: " + " | ".join(page.console[-10:])) from None


def test_wake_signals_probe_a_frozen_connection_at_once(pages, browser, frozen_web):
    proxy, url = frozen_web
    ada, bo = new_user(), new_user()
    ctx = browser.new_context(viewport={"width": 760, "height": 620})
    try:
        a = WebPage(ctx.new_page(), ada).sign_in(url, "Ada")
        b = pages(bo, "Bo")
        b.open_chat(ada)
        b.send("before the lid closed")
        _preview_is(a, "before the lid closed")
        cdp = ctx.new_cdp_session(a.page)
        cdp.send("Network.enable")
        offline = {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}
        # 1: the network goes away and comes back (the browser's offline → online) over a frozen link
        assert proxy.freeze() >= 1
        cdp.send("Network.emulateNetworkConditions", offline)
        b.send("back online 📶")
        b.wait_rows("rows => rows.length === 2 && rows[1].state === 'sent'")
        cdp.send("Network.emulateNetworkConditions", {**offline, "offline": False})
        _preview_is(a, "back online 📶")
        a.wait_state("ready")
        # 2, 3: the tab is shown again, a frozen page resumes. Headless Chromium keeps every
        # page visible and Page.setWebLifecycleState fires no freeze/resume events in it, so
        # the events are given to the document as the browser would give them.
        for n, (signal, text) in enumerate([("visibilitychange", "tab shown again 👀"), ("resume", "lid opened 💻")]):
            assert proxy.freeze() >= 1
            b.send(text)
            b.wait_rows(f"rows => rows.length === {3 + n} && rows[{2 + n}].state === 'sent'")
            a.page.evaluate("s => document.dispatchEvent(new Event(s))", signal)
            _preview_is(a, text)
            a.wait_state("ready")
        a.shot("woken")
    finally:
        ctx.close()
