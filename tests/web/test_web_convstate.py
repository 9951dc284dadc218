"""Pin, mute, hide and read ticks on the web page (qim-js) against the real stack, with
Python SDK peers (issue 37; docs/decisions/0122): what a person clicks in the list
reaches the user's other device (a Python SDK client), orders the list, leaves it until
a new message; a direct chat's own message shows "read" once the peer read it."""

from __future__ import annotations

import time

from qim._core import ids
from tests.web.harness import SdkPeer, new_user


def _until(pred, what: str, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, f"{what} not reached within {timeout} s"
        time.sleep(0.05)


def test_pin_mute_hide_from_the_list_and_read_ticks(pages, stack, tmp_path):
    ada, bo, cy = new_user(), new_user(), new_user()
    bo_peer, cy_peer = SdkPeer(stack, tmp_path / "bo", bo), SdkPeer(stack, tmp_path / "cy", cy)
    phone = SdkPeer(stack, tmp_path / "ada", ada)  # Ada's other device (device 1)
    a = pages(ada, "Ada", device=2)
    with_bo, with_cy = ids.conversation_id_direct(0, ada, bo), ids.conversation_id_direct(0, ada, cy)
    try:
        for peer, conv in ((bo_peer, with_bo), (cy_peer, with_cy)):
            peer.run(peer.client.open_direct(ada))
            peer.run(peer.client.send_text(conv, f"from {peer.user}"))
        a.page.wait_for_function("() => document.querySelectorAll('[data-testid=conversation]').length === 2")

        def order() -> list[str]:
            return a.page.eval_on_selector_all("[data-testid=conversation]", "els => els.map(e => e.dataset.conversation)")
        _until(lambda: order() == [with_cy.hex(), with_bo.hex()], "newest first")

        # pin the older chat: first on the page, pinned on Ada's other device
        a.page.click(f"[data-conversation='{with_bo.hex()}'] [data-testid=conversation-pin]")
        _until(lambda: order() == [with_bo.hex(), with_cy.hex()], "pinned first on the page")
        _until(lambda: phone.client.conversation_state(with_bo).pinned, "pin on the other device")
        assert [c.conversation_id for c in phone.run(phone.client.conversations())] == [with_bo, with_cy]

        # mute the other: marked on the page, muted on the phone, its unread kept
        a.page.click(f"[data-conversation='{with_cy.hex()}'] [data-testid=conversation-mute]")
        a.page.wait_for_selector(f"[data-conversation='{with_cy.hex()}'] [data-testid=conversation-marks][data-muted=true]")
        _until(lambda: phone.client.conversation_state(with_cy).muted(), "mute on the other device")
        assert a.page.get_attribute(f"[data-conversation='{with_cy.hex()}']", "data-unread") == "1"
        # the marks and the three buttons share one line under the preview (they zigzagged
        # between the row's two grid columns: a newcomer's report)
        boxes = a.page.eval_on_selector_all(
            f"[data-conversation='{with_cy.hex()}'] :is([data-testid=conversation-marks], [data-testid=conversation-pin],"
            " [data-testid=conversation-mute], [data-testid=conversation-hide], [data-testid=last-message])",
            "els => els.map(e => [e.dataset.testid, e.getBoundingClientRect().top, e.getBoundingClientRect().bottom,"
            " e.getBoundingClientRect().left])")
        line = {tid: (top, bottom, left) for tid, top, bottom, left in boxes}
        tops = [line[t][0] for t in ("conversation-marks", "conversation-pin", "conversation-mute", "conversation-hide")]
        assert max(tops) - min(tops) < 6, line
        assert min(tops) >= line["last-message"][1] - 1, line
        lefts = [line[t][2] for t in ("conversation-marks", "conversation-pin", "conversation-mute", "conversation-hide")]
        assert lefts == sorted(lefts), line

        # hide it: gone from the page and the phone's list until cy writes again
        a.page.click(f"[data-conversation='{with_cy.hex()}'] [data-testid=conversation-hide]")
        _until(lambda: order() == [with_bo.hex()], "hidden on the page")
        _until(lambda: [c.conversation_id for c in phone.run(phone.client.conversations())] == [with_bo],
               "hidden on the other device")
        cy_peer.run(cy_peer.client.send_text(with_cy, "back"))
        _until(lambda: order() == [with_bo.hex(), with_cy.hex()], "back on the page after a new message")

        # a read tick: Ada writes to bo, bo reads, the page marks the row read
        a.page.click(f"[data-conversation='{with_bo.hex()}'] [data-testid=conversation-title]")
        a.page.wait_for_selector("[data-testid=chat]:not([hidden])")
        a.send("did you read this?")
        a.wait_rows("rows => rows.length === 2 && rows.every(r => r.state === 'sent')")
        assert a.page.query_selector("[data-testid=message-read]") is None
        _until(lambda: b"did you read this?" in bo_peer.bodies(with_bo), "the message at bo")
        bo_peer.run(bo_peer.client.mark_read(with_bo))
        a.page.wait_for_selector("[data-testid=message-read]")
        assert a.page.text_content("[data-testid=message-read]") == "✓✓ read"
    finally:
        for p in (bo_peer, cy_peer, phone):
            p.close()
