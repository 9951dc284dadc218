"""Reactions and typing on the web page (qim-js) against the real stack, with a Python SDK
peer (issue 37; docs/decisions/0121): what a person clicks under a message reaches the
peer and is shown with its count, the peer's reaction appears live, a second click takes
one's own away, and a reload with the chat open shows its reactions again (no error);
the peer's typing shows in the chat title and goes by itself, and typing in the composer
reaches the peer."""

from __future__ import annotations

import time

from qim._core import ids
from tests.web.harness import SdkPeer, new_user

EXPIRY_WAIT_S = 40.0


def _until(pred, what: str, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, f"{what} not reached within {timeout} s"
        time.sleep(0.05)


def test_reactions_clicked_under_a_message_and_typing_in_the_title(pages, stack, tmp_path):
    ada, bo = new_user(), new_user()
    bo_peer = SdkPeer(stack, tmp_path / "bo", bo)
    a = pages(ada, "Ada")
    chat = ids.conversation_id_direct(0, ada, bo)
    try:
        bo_peer.run(bo_peer.client.open_direct(ada))
        hello = bo_peer.run(bo_peer.client.send_text(chat, "react to this"))
        a.page.wait_for_selector(f"[data-conversation='{chat.hex()}'] [data-testid=conversation-title]")
        a.page.click(f"[data-conversation='{chat.hex()}'] [data-testid=conversation-title]")
        a.wait_rows("rows => rows.length === 1 && rows[0].state === 'sent'")

        # Ada clicks ☺+ then 👍: her reaction under the message, and at Bo
        a.page.click("[data-testid=message-reactions] [data-testid=react]")
        a.page.click("[data-testid=reaction-pick][data-emoji='👍']")
        a.page.wait_for_selector("[data-testid=reaction][data-emoji='👍'][data-mine=true]")
        assert a.page.text_content("[data-testid=reaction][data-emoji='👍']") == "👍 1"
        _until(lambda: bo_peer.run(bo_peer.client.reactions.summaries(chat)).get(hello.message_id) is not None,
               "the reaction at Bo")
        seen = bo_peer.run(bo_peer.client.reactions.summaries(chat))[hello.message_id]
        assert seen.counts == (("👍", 1, False),)

        # Bo's reaction appears live; Ada's click on her own takes it away
        bo_peer.run(bo_peer.client.reactions.add(chat, hello.message_id, "🎉"))
        a.page.wait_for_selector("[data-testid=reaction][data-emoji='🎉'][data-mine=false]")
        a.page.click("[data-testid=reaction][data-emoji='👍']")
        a.page.wait_for_selector("[data-testid=reaction][data-emoji='👍']", state="detached")
        assert a.page.text_content("[data-testid=reaction][data-emoji='🎉']") == "🎉 1"

        # a reload with the chat open: its reactions are read once connected (the page reopened
        # the chat before connecting and said "reactions: call connect() first", showing none)
        a.page.reload()
        a.page.wait_for_selector("[data-testid=conn-state][data-state=ready]")
        a.page.wait_for_selector("[data-testid=reaction][data-emoji='🎉'][data-mine=false]")
        assert not a.page.is_visible("[data-testid=error]"), a.page.text_content("[data-testid=error]")

        # typing: Bo's shows beside the title (never in it) until it expires; Ada's reaches Bo
        bo_peer.run(bo_peer.client.reactions.typing(chat))
        a.page.wait_for_function("() => document.querySelector('[data-testid=chat-typing]').textContent"
                                 ".includes('is typing…')")
        assert "typing" not in a.page.text_content("[data-testid=chat-title]")
        a.page.wait_for_function("() => !document.querySelector('[data-testid=chat-typing]').textContent"
                                 ".includes('typing…')", timeout=int(EXPIRY_WAIT_S * 1000))
        a.page.type("[data-testid=composer-text]", "hi")
        _until(lambda: bo_peer.client.reactions.typing_in(chat) == [ada], "Ada typing at Bo")
    finally:
        bo_peer.close()
