"""The browser harness itself (tests/web/browser.py): Chromium runs on a thread of its
own, so the main thread keeps no running event loop while it is up, whatever the test
order (an asyncio test, or a sync test that calls asyncio.run, after or beside the
browser tests)."""

from __future__ import annotations

import asyncio


def test_asyncio_runs_in_the_main_thread_while_the_browser_is_up(browser):
    page = browser.new_context().new_page()
    page.set_content("<p id=x>up</p>")
    assert page.text_content("#x") == "up"
    assert asyncio.run(asyncio.sleep(0, result="ran")) == "ran"  # no loop left running here
    page.context.close()
