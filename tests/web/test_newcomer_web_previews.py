"""The conversation list of the web page says what the newest event of a direct chat
was: after the peer recalls a message, "(a message was recalled)", as qim-desktop says
(H7's first hour: it read "(group change)", in a chat of two people with no group)."""

from __future__ import annotations

import time

from qim._core import ids
from tests.web.harness import SdkPeer, new_user


def _until(pred, what: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, f"{what} not reached within {timeout} s"
        time.sleep(0.1)


def test_a_recall_in_a_direct_chat_is_not_a_group_change(pages, stack, tmp_path):
    ada, bo = new_user(), new_user()
    peer = SdkPeer(stack, tmp_path / "bo", bo)
    conv = ids.conversation_id_direct(0, ada, bo)
    try:
        a = pages(ada, "Ada")
        peer.run(peer.client.open_direct(ada))
        ack = peer.run(peer.client.send_text(conv, "周末见 🏔️"))
        preview = "[data-testid=conversation] [data-testid=last-message]"
        a.page.wait_for_selector(preview, timeout=60_000)
        _until(lambda: a.page.text_content(preview).endswith("周末见 🏔️"), "the message in Ada's list")
        peer.run(peer.client.recall(conv, ack.message_id))
        _until(lambda: "周末见" not in a.page.text_content(preview), "the recall in Ada's list")
        assert a.page.text_content(preview) == "(a message was recalled)"
    finally:
        peer.close()
