"""The web client's connection life in a real browser: a reload keeps
history and pending sends (IndexedDB); a gateway outage and restart reconnects and
resends once; the unread badge rises and clears on read, also in a second tab of the
same user (READ_SYNC, also of a read the open tab made by itself); a second login of the same device kicks the first page, which
shows the banner and does not reconnect by itself."""

from __future__ import annotations

from qim._core import ids
from tests.web.harness import new_user


def test_reload_keeps_history_and_pending_across_a_gateway_restart(pages, stack):
    ada, bo = new_user(), new_user()
    a = pages(ada, "Ada")
    b = pages(bo, "Bo")
    a.open_chat(bo)
    a.send("before the outage 🌧️")
    a.wait_rows("rows => rows.length === 1 && rows[0].state === 'sent'")
    stack.stop_service("gateway")
    try:
        a.wait_state("reconnecting")
        a.send("written while the gateway is down ☂️")
        a.wait_rows("rows => rows.length === 2 && rows[1].state === 'pending'")
        sockets_before = len(a.sockets)
        a.page.reload()  # the tab keeps its device: IndexedDB holds history and the pending send
        a.page.wait_for_selector("[data-testid=conversation]")
        a.open_conversation(0)
        a.wait_rows("rows => rows.length === 2 && rows[0].state === 'sent' && rows[1].state === 'pending'")
        assert [r["text"] for r in a.rows()] == ["before the outage 🌧️", "written while the gateway is down ☂️"]
        a.shot("reload-pending")
    finally:
        stack.start_service("gateway")
        stack.wait_ready(["gateway"])
    a.wait_state("ready", timeout=60_000)
    a.wait_rows("rows => rows.length === 2 && rows.every(r => r.state === 'sent')", timeout=60_000)
    assert len(a.sockets) > sockets_before  # it reconnected by itself
    b.wait_state("ready", timeout=60_000)
    b.page.wait_for_selector("[data-testid=unread-badge]")
    b.open_conversation(0)
    b.wait_rows("rows => rows.length === 2")
    assert [r["text"] for r in b.rows()] == ["before the outage 🌧️", "written while the gateway is down ☂️"]


def test_unread_rises_and_clears_in_two_tabs(pages):
    ada, bo = new_user(), new_user()
    a1 = pages(ada, "Ada")
    a2 = pages(ada, "Ada", context=a1)  # a second tab of the same profile: another device of Ada
    b = pages(bo, "Bo")
    b.open_chat(ada)
    for text in ["一", "二", "三 🎉"]:
        b.send(text)
    b.wait_rows("rows => rows.length === 3 && rows.every(r => r.state === 'sent')")
    for tab in (a1, a2):
        tab.page.wait_for_function("() => document.querySelector('[data-testid=unread-badge]')?.textContent === '3'")
    assert a1.unread() == [3] and a2.unread() == [3]
    a1.open_conversation(0)  # reading in one tab clears the badge in both (MARK_READ → READ_SYNC)
    for tab in (a1, a2):
        tab.page.wait_for_selector("[data-testid=unread-badge]", state="detached")
    assert a1.unread() == [0] and a2.unread() == [0]
    # a1 still shows the conversation, so it reads what arrives there at once and a2
    # follows: a2's badge for it is at most a moment's "1", never a state to wait for
    b.send("四")
    a1.wait_rows("rows => rows.length === 4 && rows[3].text === '四'")
    a2.wait_true("""() => {
        const c = document.querySelector('[data-testid=conversation]');
        return c?.dataset.unread === '0' && c.querySelector('[data-testid=last-message]').textContent.endsWith('四');
    }""", "the chat read up to '四'")
    a1.page.close()  # no tab of Ada shows it now: the next message stays unread in a2
    b.send("五")
    a2.page.wait_for_function("() => document.querySelector('[data-testid=unread-badge]')?.textContent === '1'")
    assert a2.unread() == [1]
    a2.shot("unread-second-tab")
    conv = ids.conversation_id_direct(0, ada, bo).hex()
    assert a2.page.get_attribute("[data-testid=conversation]", "data-conversation") == conv


def test_second_login_kicks_the_first_page(pages):
    ada = new_user()
    device = new_user()
    first = pages(ada, "Ada", device=device)
    second = pages(ada, "Ada", device=device)  # another browser, the same device id
    first.page.wait_for_selector("[data-testid=kicked-banner]:not([hidden])")
    assert first.state() == "kicked" and second.state() == "ready"
    opened = len(first.sockets)
    first.page.wait_for_timeout(4000)  # longer than the reconnect backoff
    assert len(first.sockets) == opened and first.state() == "kicked"
    first.page.reload()  # still kicked after a reload: the banner, no sign-in by itself
    first.page.wait_for_selector("[data-testid=kicked-banner]:not([hidden])")
    first.page.wait_for_timeout(1000)
    assert first.state() == "kicked" and second.state() == "ready"
    first.shot("kicked")
    first.page.click("[data-testid=relogin]")  # only the person's click signs in again
    first.wait_state("ready")
    second.page.wait_for_selector("[data-testid=kicked-banner]:not([hidden])")
