"""Replies, mentions and edits on the web page (qim-js) against the real stack, with a
Python SDK peer (issue 37; docs/decisions/0120): what a person clicks. Ada replies to
Bo's message with "reply" (the page quotes it as the server did; Bo's SDK is told the
reply with the server's preview and the @mention), edits her last message with "edit"
(Bo is told the new version), sees Bo's edit marked "edited", and a reply to a message
Bo recalled shows "message recalled"."""

from __future__ import annotations

import time

from qim._core import ids
from qim.sdk import MessagesAdded, MessagesUpdated
from tests.web.harness import SdkPeer, new_user


def _until(pred, what: str, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, f"{what} not reached within {timeout} s"
        time.sleep(0.05)


def _told(peer: SdkPeer, kind) -> list:
    return [m for e in list(peer.told) if isinstance(e, kind) for m in e.messages]


def test_reply_edit_and_mention_as_a_person_clicks_them(pages, stack, tmp_path):
    ada, bo = new_user(), new_user()
    peer = SdkPeer(stack, tmp_path / "bo", bo)
    a = pages(ada, "Ada")
    conv = ids.conversation_id_direct(0, ada, bo)
    try:
        peer.run(peer.client.open_direct(ada))
        question = peer.run(peer.client.send_text(conv, "Lunch at noon? 🍜"))
        doomed = peer.run(peer.client.send_text(conv, "wrong chat, sorry"))
        a.open_chat(bo)
        a.wait_rows("rows => rows.length === 2")
        # reply to the first message: the banner says what is replied to, the row quotes it
        a.page.locator("[data-testid=message]").nth(0).locator("[data-testid=reply]").click()
        assert "Lunch at noon?" in a.page.text_content("[data-testid=draft-what]")
        a.send(f"yes @{bo}")
        a.wait_rows("rows => rows.length === 3 && rows[2].state === 'sent'")
        a.page.wait_for_selector("[data-testid=message]:nth-child(3) [data-testid=reply-quote]")
        quote = a.page.text_content("[data-testid=message]:nth-child(3) [data-testid=reply-quote]")
        assert quote.startswith("↩ ") and quote.endswith(": Lunch at noon? 🍜"), quote
        _until(lambda: any(m.reply is not None and m.body == f"yes @{bo}".encode() for m in _told(peer, MessagesAdded)),
               "Bo told the reply")
        (got,) = [m for m in _told(peer, MessagesAdded) if m.body == f"yes @{bo}".encode()]
        assert got.reply.message_id == question.message_id and got.reply.preview == "Lunch at noon? 🍜"
        assert got.mentions == (bo,)
        # edit my last message: its text goes into the composer, Enter saves the new version
        a.page.locator("[data-testid=message]").nth(2).locator("[data-testid=edit-message]").click()
        assert a.page.input_value("[data-testid=composer-text]") == f"yes @{bo}"
        a.send("yes, at 12:30")
        _until(lambda: any(m.message_id == got.message_id and m.body == b"yes, at 12:30" and m.edited
                           for m in _told(peer, MessagesUpdated)), "Bo told the edit")
        a.wait_rows("rows => rows.length === 3 && rows[2].text === 'yes, at 12:30'")
        a.page.wait_for_selector("[data-testid=message]:nth-child(3) [data-testid=edited]")
        # Bo edits his question: the page shows the new text marked edited
        peer.run(peer.client.edit(conv, question.message_id, "Lunch at 12:30? 🍜"))
        a.wait_rows("rows => rows[0].text === 'Lunch at 12:30? 🍜'")
        a.page.wait_for_selector("[data-testid=message]:nth-child(1) [data-testid=edited]")
        # a reply to a message recalled meanwhile is quoted as recalled
        a.page.locator("[data-testid=message]").nth(1).locator("[data-testid=reply]").click()
        peer.run(peer.client.recall(conv, doomed.message_id))
        a.wait_rows("rows => rows[1].state === 'recalled'")
        a.send("no problem")
        a.wait_rows("rows => rows.length === 4 && rows[3].state === 'sent'")
        a.page.wait_for_selector("[data-testid=message]:nth-child(4) [data-testid=reply-quote]")
        assert a.page.text_content("[data-testid=message]:nth-child(4) [data-testid=reply-quote]").endswith(
            "message recalled")
    finally:
        peer.close()
