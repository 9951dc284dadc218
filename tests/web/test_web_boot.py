"""The sign-in form before the page has started (a CI failure: "never showed 'ready'
... 0 socket(s) opened, console empty"). The page sets the form's handler only after
/config.json arrived; a click before that (a busy machine, a slow network) submitted
the form natively, reloaded the page and lost what was typed, and nothing connected.
Now the Sign in button stays disabled until the handler is set (web/index.html,
web/src/app/main.ts boot), and a /config.json that fails is said on the page.

/config.json is held by a Playwright route here, so the window is as long as the test
wants: deterministic, no timing."""

from __future__ import annotations

import queue
import time

from tests.web.harness import TIMEOUT_MS, WebPage, new_user


def held_route(a: WebPage, held: "queue.Queue"):
    """The route the page's /config.json request was held at. Playwright runs the route
    handler on its thread only while a call lets its loop run (tests/web/browser.py):
    waiting on the queue alone saw nothing when the request came after `goto` had
    returned (a CI run on a busy machine, 2026-12-07), so the wait pumps that loop."""
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while True:
        try:
            return held.get_nowait()
        except queue.Empty:
            assert time.monotonic() < deadline, f"the page never asked for /config.json within {TIMEOUT_MS} ms"
            a.page.wait_for_timeout(50)


def test_sign_in_waits_for_the_page_to_start_and_then_connects(browser, web_url):
    held: "queue.Queue" = queue.Queue()  # the held /config.json route (a raw Playwright object)
    ctx = browser.new_context(viewport={"width": 760, "height": 620})
    try:
        a = WebPage(ctx.new_page(), new_user())
        a.page.route("**/config.json", lambda route: held.put(route))
        a.page.goto(web_url, wait_until="commit")  # back before the page's script asked: held_route pumps
        route = browser._owner.wrap(held_route(a, held))  # the page asked; the answer is held
        assert a.page.is_disabled("[data-testid=login-submit]")  # no native submit meanwhile
        a.page.fill("[data-testid=login-user]", str(a.user))
        a.page.fill("[data-testid=login-name]", "Early")
        route.continue_()
        a.page.click("[data-testid=login-submit]")  # Playwright waits until it is enabled
        a.wait_state("ready")
        assert len(a.sockets) == 1
        assert a.page.text_content("[data-testid=me]").startswith("Early · ")
    finally:
        ctx.close()


def test_a_config_that_fails_is_said_and_the_form_stays_disabled(browser, web_url):
    ctx = browser.new_context(viewport={"width": 760, "height": 620})
    try:
        a = WebPage(ctx.new_page(), new_user())
        a.page.route("**/config.json", lambda route: route.fulfill(status=503, body="down"))
        a.page.goto(web_url)
        a.page.wait_for_selector("[data-testid=error]:not([hidden])")
        assert "could not start" in a.page.text_content("[data-testid=error]")
        assert "503" in a.page.text_content("[data-testid=error]")
        assert a.page.is_disabled("[data-testid=login-submit]")
        assert a.sockets == []
    finally:
        ctx.close()
