"""The page gives a text the send policy refused back to the person (web/src/app/refused.ts):
into the composer when it is empty, with the reason on the red row; when something was
typed since, the row's "edit" link puts it back before what was typed; nothing is sent
again by itself. Chinese text and emoji come back as typed (screenshot
web/test-results/refused-text.png).

Debian's Chromium against qim-web serving web/dist and a real stack of this module's own
whose writer loads the test send policy (tests/policy/switch.py: b"spam" refused with
"spam is not welcome here"; b"switch" answered from a file: "hold" then "refuse:...").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from qim.dev.webserver import serve
from tests.policy.switchstack import policy_stack_of, switch_file
from tests.web.conftest import gateway_ws_url
from tests.web.harness import DIST, WebPage, new_user

SPAM = "买 spam 便宜吗？🙂\n第二行"
COMPOSER = "[data-testid=composer-text]"


@pytest.fixture(scope="module")
def switch(tmp_path_factory) -> Path:
    """The file steering tests.policy.switch for sends with b"switch" in the body."""
    return switch_file(tmp_path_factory)


@pytest.fixture(scope="module")
def policy_web(tmp_path_factory, switch):
    """qim-web against a stack whose writer loads the test policy (tests/policy/switchstack.py)."""
    if not (DIST / "index.html").is_file():
        pytest.fail(f"{DIST}/index.html is missing: run `make web-build`", pytrace=False)
    with policy_stack_of(tmp_path_factory, switch) as st:
        httpd = serve("127.0.0.1", 0, DIST, gateway_ws_url(st), st.token_key)
        yield f"http://127.0.0.1:{int(httpd.server_address[1])}/"
        httpd.shutdown()


@pytest.fixture
def page(browser, policy_web):
    """A signed-in page of a new user, its context closed after the test."""
    ctx = browser.new_context(viewport={"width": 760, "height": 620})
    p = WebPage(ctx.new_page(), new_user())
    p.page.set_default_timeout(30_000)
    yield p.sign_in(policy_web, "Ada")
    ctx.close()


def statuses(p: WebPage) -> list[str]:
    """Each row's status text, in order."""
    return p.page.eval_on_selector_all("[data-testid=message-status]", "els => els.map(e => e.textContent)")


def test_a_refused_text_comes_back_into_the_composer_with_its_reason(page):
    page.open_chat(new_user())
    page.send(SPAM)
    page.wait_rows("rows => rows.length === 1 && rows[0].state === 'failed'")
    assert statuses(page) == ["failed: POLICY_REFUSED: spam is not welcome here"]  # the reason stays
    page.page.wait_for_function(f"() => document.querySelector('{COMPOSER}').value === {SPAM!r}")
    assert page.page.locator("[data-testid=edit]").count() == 0  # already back: nothing to offer
    page.shot("refused-text")
    # nothing is sent again by itself: another send passes, the refused row stays failed
    page.page.fill(COMPOSER, "好的 fine")
    page.page.click("[data-testid=composer-send]")
    page.wait_rows("rows => rows.length === 2 && rows[0].state === 'sent'")  # committed rows first
    assert [(r["state"], r["text"]) for r in page.rows()] == [("sent", "好的 fine"), ("failed", SPAM)]
    assert page.page.input_value(COMPOSER) == ""


def test_a_refusal_arriving_while_typing_is_offered_by_edit(page, switch):
    page.open_chat(new_user())
    switch.write_text("hold")  # held (the SDK retries it) while the person types on
    try:
        page.send("switch 你好")
        page.wait_rows("rows => rows.length === 1 && rows[0].state === 'pending'")
        page.page.fill(COMPOSER, "新的草稿")
        switch.write_text("refuse:not today")
        page.wait_rows("rows => rows.length === 1 && rows[0].state === 'failed'", timeout=60_000)
    finally:
        switch.write_text("accept")
    assert statuses(page) == ["failed: POLICY_REFUSED: not today"]  # the reason, and the link to edit
    assert page.page.locator("[data-testid=edit]").count() == 1
    assert page.page.input_value(COMPOSER) == "新的草稿"  # what was typed since is left alone
    page.page.click("[data-testid=edit]")
    assert page.page.input_value(COMPOSER) == "switch 你好\n新的草稿"
    assert page.page.locator("[data-testid=edit]").count() == 0
    assert [r["state"] for r in page.rows()] == ["failed"]  # nothing resent by itself
