"""Signing in on the web page with a pasted token alone (its claims name the user and
the device): the form no longer insists on a user id the token already gives (H7's first
hour: "Please fill out this field." on User id, and nothing happened). A bad token is
told in words; an empty form says what it needs."""

from __future__ import annotations

from qim.wire.devtoken import issue_dev_token
from tests.web.harness import TIMEOUT_MS, new_user


def _form(browser, web_url):
    ctx = browser.new_context(viewport={"width": 760, "height": 620})
    page = ctx.new_page()
    page.goto(web_url)
    return ctx, page


def test_a_pasted_token_alone_signs_in(browser, web_url, stack):
    user = new_user()
    token = issue_dev_token(stack.token_key, 0, user, 5, name="Tok")
    ctx, page = _form(browser, web_url)
    try:
        page.fill("[data-testid=login-token]", token)
        page.click("[data-testid=login-submit]")
        page.wait_for_selector("[data-testid=conn-state][data-state=ready]", timeout=TIMEOUT_MS)
        me = page.text_content("[data-testid=me]")  # "Tok · Chrome tab · 5": the token's name and device
        assert me.startswith("Tok · ") and me.endswith(" · 5"), me
    finally:
        ctx.close()


def test_a_bad_token_and_an_empty_form_are_told(browser, web_url):
    ctx, page = _form(browser, web_url)
    try:
        page.click("[data-testid=login-submit]")
        page.wait_for_selector("[data-testid=error]:not([hidden])", timeout=TIMEOUT_MS)
        assert page.text_content("[data-testid=error]") == "sign in: give a user id, or paste a token"
        page.fill("[data-testid=login-token]", "abc.def.ghi")
        page.click("[data-testid=login-submit]")
        page.wait_for_function("() => document.querySelector('[data-testid=error]').textContent.includes('base64url')",
                               timeout=TIMEOUT_MS)
        assert page.text_content("[data-testid=error]") == "sign in: the token's claims are not base64url JSON"
    finally:
        ctx.close()
