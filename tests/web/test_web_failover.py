"""The web page fails over to another gateway (issue 34 item 2; docs/decisions/0082), in
Chromium. qim-web hands the page two gateway addresses (two loopback proxies in front of
the stack's gateway, as two gateways of one deployment share the servers). The page is
on the first when that one freezes completely (tests/web/freezeproxy.py: open links
hold their bytes, no FIN, no RST, and new links hang too, as a SIGSTOPped gateway's
kernel accepts TCP for a process that never answers). A peer writes; the page is given
the browser's `online` signal (its probe gives the frozen link up within 2 s) and must
show the message through the second gateway, never dialling the frozen one first."""

from __future__ import annotations

import asyncio

import pytest

from qim.dev.webserver import serve
from tests.web.conftest import gateway_ws_url
from tests.web.freezeproxy import FreezeProxy
from tests.web.harness import DIST, WebPage, new_user

WITHIN_MS = 20_000  # probe 2 s + reconnect and sync on a loaded machine; without failover: never


class DeadGateway(FreezeProxy):
    """A FreezeProxy that, once `freeze_all()` was called, freezes new links at once."""

    all_frozen = False

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        before = len(self.links)
        await super()._serve(reader, writer)
        if self.all_frozen and len(self.links) > before:
            self.links[-1][0].clear()  # before its pumps first run: nothing passes either way

    def freeze_all(self) -> int:
        """Freeze the open links and every later one; the number frozen now."""
        self.all_frozen = True
        return self.freeze()


@pytest.fixture
def two_gateway_web(stack):
    """(first, second, url): qim-web whose page gets both proxies as its gateways."""
    ws = gateway_ws_url(stack)
    hostport = ws.split("//", 1)[1].split("/", 1)[0]
    first, second = DeadGateway(hostport), FreezeProxy(hostport)
    both = ",".join(ws.replace(hostport, p.addr) for p in (first, second))
    httpd = serve("127.0.0.1", 0, DIST, both, stack.token_key)
    yield first, second, f"http://127.0.0.1:{int(httpd.server_address[1])}/"
    httpd.shutdown()
    first.close()
    second.close()


def test_the_page_moves_to_the_other_gateway_when_its_own_freezes(pages, browser, two_gateway_web):
    first, second, url = two_gateway_web
    ada, bo = new_user(), new_user()
    ctx = browser.new_context(viewport={"width": 760, "height": 620})
    try:
        a = WebPage(ctx.new_page(), ada).sign_in(url, "Ada")
        assert a.sockets and first.addr in a.sockets[-1], a.sockets  # the first gateway first
        b = pages(bo, "Bo")
        b.open_chat(ada)
        b.send("before the freeze")
        a.page.wait_for_function("t => document.querySelector('[data-testid=last-message]')?.textContent"
                                 ".endsWith(t)", arg="before the freeze", timeout=WITHIN_MS)
        assert first.freeze_all() >= 1
        opened = len(a.sockets)
        b.send("through gateway 2 🛟")
        b.wait_rows("rows => rows.length === 2 && rows[1].state === 'sent'")
        a.page.evaluate("() => window.dispatchEvent(new Event('online'))")
        try:
            a.page.wait_for_function("t => document.querySelector('[data-testid=last-message]')?.textContent"
                                     ".endsWith(t)", arg="through gateway 2 🛟", timeout=WITHIN_MS)
        except Exception as exc:  # Playwright's TimeoutError: say what the page did instead
            if "Timeout" not in type(exc).__name__:
                raise
            raise AssertionError(f"not shown within {WITHIN_MS} ms: the page is {a.state()!r}, sockets "
                                 f"{a.sockets}, console: " + " | ".join(a.console[-10:])) from None
        a.wait_state("ready")
        later = a.sockets[opened:]
        assert later and second.addr in later[0], later  # the first dial after the loss went to gateway 2
        a.shot("failover")
    finally:
        ctx.close()
