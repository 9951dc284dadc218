"""A newcomer on the web page edits a message that her other device recalled meanwhile
(docs/decisions/0120): the server refuses the edit (FORBIDDEN). She is told in words,
her new text stays in the composer and the page is still editing (its banner and ✕):
Enter does not turn the refused edit into a new message. Before, the page forgot it was
editing, so the next Enter sent the text to the chat as a new message."""

from __future__ import annotations

import time

from qim._core import ids
from qim.sdk import MessagesAdded
from tests.web.harness import SdkPeer, new_user


def _until(pred, what: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, f"{what} not reached within {timeout} s"
        time.sleep(0.05)


def test_a_refused_edit_keeps_the_text_and_the_edit(pages, stack, tmp_path):
    ada, bo = new_user(), new_user()
    other = SdkPeer(stack, tmp_path / "ada-phone", ada)  # Ada's other device (device 1)
    conv = ids.conversation_id_direct(0, ada, bo)
    try:
        a = pages(ada, "Ada", device=2)
        a.open_chat(bo)
        a.send("明天见")
        a.wait_rows("rows => rows.length === 1 && rows[0].state === 'sent'")
        a.page.locator("[data-testid=message]").nth(0).locator("[data-testid=edit-message]").click()
        assert a.page.input_value("[data-testid=composer-text]") == "明天见"
        # the other device recalls it while the page is editing
        _until(
            lambda: any(
                m.body == "明天见".encode()
                for e in list(other.told)
                if isinstance(e, MessagesAdded)
                for m in e.messages
            ),
            "the other device has the message",
        )
        (mine,) = [
            m
            for e in list(other.told)
            if isinstance(e, MessagesAdded)
            for m in e.messages
            if m.body == "明天见".encode()
        ]
        other.run(other.client.open_direct(bo))  # the conversation known on that device
        other.run(other.client.recall(conv, mine.message_id))
        a.wait_rows("rows => rows[0].state === 'recalled'")
        a.send("明天下午见")
        a.page.wait_for_selector("[data-testid=error]:not([hidden])")
        assert a.page.input_value("[data-testid=composer-text]") == "明天下午见"
        assert a.page.locator("[data-testid=draft-what]").count() == 1, "the page forgot it was editing"
        assert a.page.text_content("[data-testid=draft-what]") == "editing your message"
        said = a.page.text_content("[data-testid=error]")
        assert "edit was refused" in said and "FORBIDDEN" in said, said
        assert a.page.input_value("[data-testid=composer-text]") == "明天下午见"
        # ✕ gives the edit up; nothing was sent as a new message meanwhile
        a.page.click("[data-testid=draft-cancel]")
        assert a.page.locator("[data-testid=draft-banner]").count() == 0
        assert [r["text"] for r in a.rows()].count("明天下午见") == 0
    finally:
        other.close()
