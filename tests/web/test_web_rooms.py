"""A chatroom on the web page in a real browser against the real stack (docs/sdk.md
"Chatrooms"): the page joins a room and shows a Python SDK member's posts once, in
order; what it types is posted to the room; after the room's RoomWriter restarts (a
new room_epoch: the ring is gone) the page re-joins by itself and shows the truncation
bar, never a silent gap; "Leave" leaves the room."""

from __future__ import annotations

import asyncio
import random
import time

from tests.web.harness import SdkPeer, new_user

TRUNCATED = "[data-testid=room-truncated]"


def room_texts(page) -> list[str]:
    return page.eval_on_selector_all("[data-testid=room-text]", "els => els.map(e => e.textContent)")


def test_page_joins_a_room_posts_sees_the_truncation_bar_after_a_roomwriter_restart(pages, stack, tmp_path):
    ada, bo = new_user(), new_user()
    room = random.getrandbits(62) + 1
    peer = SdkPeer(stack, tmp_path / "bo", bo)
    a = pages(ada, "Ada")
    try:
        peer.run(peer.client.join_room(room))
        peer.run(peer.client.send_room(room, "大家好 👋"))
        a.page.fill("[data-testid=join-room-id]", str(room))
        a.page.click("[data-testid=join-room-submit]")
        a.page.wait_for_function("() => [...document.querySelectorAll('[data-testid=room-text]')]"
                                 ".some(e => e.textContent === '大家好 👋')")
        a.page.wait_for_function("() => document.querySelector('[data-testid=room-title]').textContent"
                                 ".includes('2 members')")
        a.page.fill("[data-testid=room-composer-text]", "hello from the page")
        a.page.press("[data-testid=room-composer-text]", "Enter")
        peer.run(_until(lambda: b"hello from the page" in [m.body for m in peer.client.room_events(room)]))
        # the page shows its own post when the room's event for it comes back (its room_seq):
        # the peer may see it a moment earlier
        a.page.wait_for_function("() => [...document.querySelectorAll('[data-testid=room-text]')]"
                                 ".some(e => e.textContent === 'hello from the page')")
        assert room_texts(a.page) == ["大家好 👋", "hello from the page"]
        assert a.page.query_selector(TRUNCATED) is None

        stack.kill_service("room")
        stack.start_service("room")
        stack.wait_ready(["room"])
        a.page.wait_for_selector(TRUNCATED, timeout=60_000)  # re-joined into a new epoch: told, not silent
        peer.run(_until(lambda: peer.client.rooms.info(room) is not None
                        and peer.client.rooms.info(room).truncated, 60))
        peer.run(peer.client.send_room(room, "after the restart"))
        a.page.wait_for_function("() => [...document.querySelectorAll('[data-testid=room-text]')]"
                                 ".some(e => e.textContent === 'after the restart')")
        assert room_texts(a.page) == ["大家好 👋", "hello from the page", "after the restart"]  # nothing twice
        a.shot("room-truncated")
        a.page.click("[data-testid=leave-room]")
        a.page.wait_for_selector("[data-testid=room]", state="hidden")
        peer.run(_until(lambda: peer.client.rooms.info(room) is not None))
    finally:
        if not stack.alive("room"):
            stack.start_service("room")
            stack.wait_ready(["room"])
        peer.close()


async def _until(predicate, timeout: float = 30.0) -> None:
    """Wait on the peer's loop until predicate() holds (AssertionError after `timeout`)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {predicate}")
        await asyncio.sleep(0.05)
