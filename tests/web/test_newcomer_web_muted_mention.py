"""A newcomer on the web page mutes a chat from the list and is then mentioned in it:
the row shows "🔕@" (data-mentioned) at once, with no reload. Before, qim-js took
`mentioned` only from the server's list entries, so a live mention showed no "@" until
the next list pull (a reconnect); a plain message sets none (docs/decisions/0122)."""

from __future__ import annotations

from qim._core import ids
from tests.web.harness import SdkPeer, new_user


def test_a_live_mention_in_a_muted_chat_marks_the_row(pages, stack, tmp_path):
    ada, wang = new_user(), new_user()
    peer = SdkPeer(stack, tmp_path / "wang", wang)
    conv = ids.conversation_id_direct(0, ada, wang)
    row = f"[data-conversation='{conv.hex()}'] [data-testid=conversation-marks]"
    try:
        peer.run(peer.client.open_direct(ada))
        peer.run(peer.client.send_text(conv, "晚上吃什么"))
        a = pages(ada, "Ada")
        a.page.wait_for_selector(row, timeout=60_000)
        a.page.click(f"[data-conversation='{conv.hex()}'] [data-testid=conversation-mute]")
        a.page.wait_for_selector(f"{row}[data-muted=true]", timeout=60_000)
        peer.run(peer.client.send_text(conv, "没提到你"))
        a.page.wait_for_function("t => document.body.textContent.includes(t)", arg="没提到你", timeout=60_000)
        assert a.page.get_attribute(row, "data-mentioned") == "false"
        peer.run(peer.client.send(conv, "@Ada 在吗".encode(), mentions=[ada]))
        a.page.wait_for_selector(f"{row}[data-mentioned=true]", timeout=30_000)
        assert a.page.text_content(row) == "🔕@"
    finally:
        peer.close()
