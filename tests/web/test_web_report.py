"""Reporting a message from the web page (issue 38; web/src/app/reportview.ts; decision 0124)
in Debian's Chromium against the session stack, with a Python SDK peer who sends the
message: a message of someone else offers "report" (one's own does not); the form takes a
reason and Chinese text; a text over 1,000 bytes is refused with the reason shown and the
text kept; shortened, it is sent and the page says so; `qimctl moderation reports` lists
it with its reason, text, reporter and the message's sender (screenshot
web/test-results/report-form.png: the Chinese text rendered with the CJK font)."""

from __future__ import annotations

import os
import subprocess
import sys

from qim._core import ids
from tests.web.harness import SdkPeer, new_user

TOO_LONG = "他一直在发广告" * 60  # 420 characters, 1,260 bytes of UTF-8: over the 1,000-byte limit
REASON_TEXT = "他一直在群里卖假手表，请处理 🙏"


def reports(stack) -> str:
    """`qimctl moderation reports` in a process of its own (the stack's Redis)."""
    env = {**os.environ, **stack.client_env(), "QIM_REDIS_ADDR": stack.env["QIM_REDIS_ADDR"]}
    done = subprocess.run(
        [sys.executable, "-m", "qim.cli.qimctl", "moderation", "reports", "--count", "1000"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_person_reports_a_message_from_the_page(pages, stack, tmp_path):
    ada, bo = new_user(), new_user()
    bo_peer = SdkPeer(stack, tmp_path / "bo", bo)
    a = pages(ada, "Ada")
    chat = ids.conversation_id_direct(0, ada, bo)
    try:
        bo_peer.run(bo_peer.client.open_direct(ada))
        sold = bo_peer.run(bo_peer.client.send_text(chat, "便宜名表，加我微信"))
        a.page.wait_for_selector(f"[data-conversation='{chat.hex()}'] [data-testid=conversation-title]")
        a.page.click(f"[data-conversation='{chat.hex()}'] [data-testid=conversation-title]")
        a.wait_rows("rows => rows.length === 1 && rows[0].state === 'sent'")
        a.send("不要再发了")
        a.wait_rows("rows => rows.length === 2 && rows.every(r => r.state === 'sent')")
        assert a.page.locator("[data-testid=report]").count() == 1  # Bo's message only, never one's own

        a.page.click("[data-testid=report]")
        form = "[data-testid=report-form]"
        a.page.wait_for_selector(form, state="visible")
        assert "便宜名表" in a.page.text_content("[data-testid=report-about]")
        a.page.select_option("[data-testid=report-reason]", "abuse")
        a.page.fill("[data-testid=report-text]", TOO_LONG)
        a.page.click("[data-testid=report-send]")
        a.page.wait_for_selector("[data-testid=report-status][data-state=failed]")
        assert "1000 bytes" in a.page.text_content("[data-testid=report-status]")
        assert a.page.input_value("[data-testid=report-text]") == TOO_LONG  # nothing typed is lost

        a.page.fill("[data-testid=report-text]", REASON_TEXT)
        a.page.click("[data-testid=report-send]")
        a.page.wait_for_selector("[data-testid=report-status][data-state=sent]")
        assert "report sent" in a.page.text_content("[data-testid=report-status]")
        assert a.page.input_value("[data-testid=report-text]") == ""
        assert a.page.evaluate("() => document.fonts.check('14px \"Noto Sans CJK SC\"', '他一直在群里卖假手表')")
        a.page.fill("[data-testid=report-text]", REASON_TEXT)  # shown in the screenshot
        a.shot("report-form")

        mine = [ln for ln in reports(stack).splitlines() if f"message={sold.message_id.hex()}" in ln]
        assert len(mine) == 1, mine  # the refused attempt stored nothing
        line = mine[0]
        assert " open abuse " in line and f"reporter={ada} " in line and f"sender={bo} " in line, line
        assert repr(REASON_TEXT) in line, line
    finally:
        bo_peer.close()
