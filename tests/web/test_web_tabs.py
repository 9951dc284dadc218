"""Tabs and the device they are (docs/decisions/0058, 0083) and why a page stopped:
a tab opened as a copy of a signed-in tab (window.open of the page, or a new tab that
starts with a copy of its sessionStorage as Chromium's "Duplicate" does) becomes a
device of its own, the original tab stays signed in and sends, and a reload keeps the
device; a device an operator revoked is told so in words, also after a reload."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.web.harness import TIMEOUT_MS, WebPage, new_user

DEVICE_JS = "() => sessionStorage.getItem('qim.device')"


def _copy_of(first: WebPage, url: str) -> WebPage:
    """A new tab of `first`'s browser profile that starts with a copy of its sessionStorage."""
    saved = first.page.evaluate("() => JSON.stringify(Object.entries(sessionStorage))")
    page = first.page.context.new_page()
    # before the page's own scripts, on the first load only (a reload keeps the tab's own)
    page.add_init_script("if (!sessionStorage.getItem('qim.session')) for (const [k, v] of "
                         f"{saved}) sessionStorage.setItem(k, v);")
    tab = WebPage(page, first.user)
    page.goto(url)
    return tab


def test_a_copied_tab_is_a_new_device_and_the_first_tab_keeps_working(pages, web_url):
    ada, bo = new_user(), new_user()
    a1 = pages(ada, "Ada")
    b = pages(bo, "Bo")
    first_device = a1.page.evaluate(DEVICE_JS)
    opened: list = []
    a1.page.context.on("page", lambda p: opened.append(p))
    a1.page.evaluate("() => { window.open(location.href); }")  # copies this tab's sessionStorage
    for _ in range(100):
        if opened:
            break
        a1.page.wait_for_timeout(100)
    assert opened, "window.open made no tab"
    a2 = WebPage(a1.page._owner.wrap(opened[0]), ada)
    a2.wait_state("ready")
    a3 = _copy_of(a1, web_url)  # Chromium's "Duplicate": a copy of the sessionStorage
    a3.wait_state("ready")
    devices = [t.page.evaluate(DEVICE_JS) for t in (a1, a2, a3)]
    assert devices[0] == first_device and len(set(devices)) == 3, devices
    # the first tab was not kicked: it still shows ready and sends
    assert a1.state() == "ready" and a1.page.is_hidden("[data-testid=kicked-banner]")
    a1.open_chat(bo)
    a1.send("still here 🙂")
    a1.wait_rows("rows => rows.length === 1 && rows[0].state === 'sent'", timeout=15_000)
    b.page.wait_for_function("() => document.querySelector('[data-testid=last-message]')?.textContent"
                             ".endsWith('still here 🙂')", timeout=TIMEOUT_MS)
    for tab in (a2, a3):  # the copies are other devices of Ada: her message reaches them too
        tab.page.wait_for_function("() => document.querySelector('[data-testid=last-message]')?.textContent"
                                   " === 'me: still here 🙂'", timeout=TIMEOUT_MS)
    # a reload keeps the device (and no copy is kicked by it)
    a2.page.reload()
    a2.wait_state("ready")
    assert a2.page.evaluate(DEVICE_JS) == devices[1]
    for tab in (a1, a2, a3):
        assert tab.state() == "ready", (tab.page.evaluate(DEVICE_JS), tab.state())
    a1.shot("copied-tab-first")
    a2.shot("copied-tab-copy")


def test_a_revoked_device_is_told_it_was_revoked(pages, stack):
    ada = new_user()
    a = pages(ada, "Ada")
    device = a.page.evaluate(DEVICE_JS)
    env = {**os.environ, "QIM_REDIS_ADDR": stack.env["QIM_REDIS_ADDR"]}
    r = subprocess.run([sys.executable, "-m", "qim.cli.qimctl", "token", "revoke", "--user", str(ada),
                        "--device", device], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    a.page.wait_for_selector("[data-testid=kicked-banner]:not([hidden])", timeout=TIMEOUT_MS)
    words = a.page.text_content("[data-testid=kicked-text]")
    assert "revoked" in words and "another page" not in words, words
    assert a.state() == "kicked" and "revoked" in (a.page.get_attribute("[data-testid=conn-state]", "title") or "")
    a.shot("revoked")
    a.page.reload()  # the reason is remembered by the tab
    a.page.wait_for_selector("[data-testid=kicked-banner]:not([hidden])")
    assert "revoked" in a.page.text_content("[data-testid=kicked-text]")
    saved = json.loads(a.page.evaluate("() => sessionStorage.getItem('qim.session')"))
    assert saved["kicked"] == 4
