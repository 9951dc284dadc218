"""The page as a person uses it (issue 34 item 9), checked in Chromium as they click:
no connection state before anyone signed in; the header names the person and the tab,
not a raw device id; a message over the limit stays in the composer with the sizes in
words; a send while the connection is down says it is not sent yet; a reload comes back
to the open chat. Screenshots: web/test-results/page-*.png."""

from __future__ import annotations

from tests.web.harness import WebPage, new_user

BIG = "长" * 380_000  # 1,140,000 bytes of UTF-8: over the 1 MiB limit


def test_the_page_says_things_in_words_and_comes_back_where_it_was(browser, web_url, pages):
    ada, bo = new_user(), new_user()
    pages(bo, "Bo")  # a peer that exists (a name to show)
    ctx = browser.new_context(viewport={"width": 760, "height": 620})
    try:
        a = WebPage(ctx.new_page(), ada)
        a.page.goto(web_url)
        a.page.wait_for_selector("[data-testid=login-form]")
        assert a.page.is_hidden("[data-testid=conn-state]")  # nobody signed in: no "offline"
        a.shot("page-sign-in")
        a.sign_in(web_url, "Ada")
        device = a.page.evaluate("() => sessionStorage.getItem('qim.device')")
        header = a.page.text_content("[data-testid=me]")
        assert header.startswith("Ada · ") and "tab" in header and device not in header, header
        assert a.page.text_content("[data-testid=conn-state]") == "online"
        a.open_chat(bo)
        conv = a.page.get_attribute("[data-testid=chat-title]", "data-conversation")
        a.page.fill("[data-testid=composer-text]", BIG)
        a.page.click("[data-testid=composer-send]")
        a.page.wait_for_selector("[data-testid=error]:not([hidden])")
        assert a.page.text_content("[data-testid=error]").startswith("Too long: 1.1 MB, the limit is 1 MB")
        assert a.page.input_value("[data-testid=composer-text]") == BIG  # kept to be shortened
        assert a.rows() == []
        a.page.fill("[data-testid=composer-text]", "")
        a.page.evaluate("() => window.qimClient.close()")  # the connection is down
        a.wait_state("offline")
        a.send("written offline ✈️")
        a.wait_rows("rows => rows.length === 1 && rows[0].state === 'pending'")
        assert a.page.text_content("[data-testid=message-status]").startswith("not sent yet: offline")
        a.shot("page-offline")
        a.page.reload()  # back to the open chat, and the unsent message goes out
        a.wait_state("ready")
        a.page.wait_for_selector("[data-testid=chat]:not([hidden])")
        assert a.page.get_attribute("[data-testid=chat-title]", "data-conversation") == conv
        a.wait_rows("rows => rows.length === 1 && rows[0].state === 'sent' && rows[0].text === 'written offline ✈️'")
        assert a.page.text_content("[data-testid=chat-title]") == "Bo"
        a.shot("page-back")
    finally:
        ctx.close()
