"""Browser storage trouble (issue 34 item 6; docs/decisions/0084), with DevTools'
controls: the origin's quota set below its usage while a peer sends 40 × 1 KiB
(the page says storage is full, a message typed meanwhile is never lost, and the tab
catches up by itself once the quota is back, with no new incoming message), and the
IndexedDB database deleted under the open page (it is re-opened and filled again from
the server: the next message arrives and a send goes out)."""

from __future__ import annotations

from tests.web.harness import TIMEOUT_MS, WebPage, new_user

N = 40
SEND_JS = """async ([conv, n]) => {
    const id = Uint8Array.from(conv.match(/../g).map((h) => parseInt(h, 16)));
    for (let i = 0; i < n; i++) await window.qimClient.sendText(id, `#${i} ` + "x".repeat(1000), false);
}"""


# a 64 KiB write to a scratch database of the origin: "refused" once the quota is in force
# (Chromium's IndexedDB keeps a cached figure of the space left for a few seconds)
QUOTA_PROBE_JS = """() => new Promise((resolve) => {
    const r = indexedDB.open("quota-probe", 1);
    r.onupgradeneeded = () => r.result.createObjectStore("s");
    r.onerror = () => resolve("refused");
    r.onsuccess = () => {
        const db = r.result, tx = db.transaction("s", "readwrite");
        tx.objectStore("s").put(new Uint8Array(65536).map(() => Math.random() * 256), Math.random());
        tx.oncomplete = () => (db.close(), resolve("stored"));
        tx.onabort = () => (db.close(), resolve(tx.error?.name === "QuotaExceededError" ? "refused" : String(tx.error)));
    };
})"""


def _conversation(b: WebPage) -> str:
    return b.page.get_attribute("[data-testid=chat-title]", "data-conversation")


def _row_count(page: WebPage, n: int, timeout: int = TIMEOUT_MS) -> None:
    page.wait_rows(f"rows => rows.length === {n} && rows.every(r => r.state === 'sent')", timeout=timeout)


def test_full_storage_is_told_keeps_typed_text_and_catches_up_by_itself(pages, web_url):
    ada, bo = new_user(), new_user()
    a = pages(ada, "Ada")
    a.open_chat(bo)
    cdp = a.page.context.new_cdp_session(a.page)
    origin = web_url.rstrip("/")
    usage = cdp.send("Storage.getUsageAndQuota", {"origin": origin})["usage"]
    # below its usage: no write fits (just above it, the browser's cached usage figure can
    # lag the database's growth and let a few small writes through)
    cdp.send("Storage.overrideQuotaForOrigin", {"origin": origin, "quotaSize": usage // 2})
    try:
        b = pages(bo, "Bo")
        b.open_chat(ada)
        for _ in range(90):
            if a.page.evaluate(QUOTA_PROBE_JS) == "refused":
                break
            a.page.wait_for_timeout(500)
        else:
            raise AssertionError("the browser kept storing for 45 s after the quota override")
        b.page.evaluate(SEND_JS, [_conversation(b), N])
        _row_count(b, N)
        a.page.wait_for_selector("[data-testid=storage-banner][data-state=full]:not([hidden])", timeout=TIMEOUT_MS)
        assert "storage is full" in a.page.text_content("[data-testid=storage-text]")
        typed = "typed while the disk was full ✍️"
        a.send(typed)
        # never lost: back in the composer (not stored, so not sent) or a row of its own
        a.page.wait_for_function("""t => document.querySelector('[data-testid=composer-text]').value === t
            || [...document.querySelectorAll('[data-testid=message-text]')].some((e) => e.textContent === t)""",
                                 arg=typed, timeout=TIMEOUT_MS)
        kept = a.page.input_value("[data-testid=composer-text]") == typed
        if kept:
            assert "Not sent" in a.page.text_content("[data-testid=error]")
        a.shot("storage-full")
    finally:
        cdp.send("Storage.overrideQuotaForOrigin", {"origin": origin})  # space is back
    # no new incoming message: the tab catches up by itself
    _row_count(a, N + (0 if kept else 1), timeout=60_000)
    a.page.wait_for_selector("[data-testid=storage-banner]", state="hidden")
    if kept:
        a.page.click("[data-testid=composer-send]")
        _row_count(a, N + 1)
    texts = [r["text"] for r in a.rows()]
    assert texts[:N] == [f"#{i} " + "x" * 1000 for i in range(N)] and texts[-1] == typed


def test_a_database_deleted_under_the_page_is_opened_again(pages, web_url):
    ada, bo = new_user(), new_user()
    a = pages(ada, "Ada")
    b = pages(bo, "Bo")
    b.open_chat(ada)
    b.send("one")
    a.page.wait_for_selector("[data-testid=conversation]")
    a.open_conversation(0)
    _row_count(a, 1)
    cdp = a.page.context.new_cdp_session(a.page)
    cdp.send("Storage.clearDataForOrigin", {"origin": web_url.rstrip("/"), "storageTypes": "indexeddb"})
    b.send("two")
    a.wait_rows("rows => rows.some(r => r.text === 'two')")
    a.wait_state("ready")
    a.send("three")
    a.wait_rows("rows => rows.some(r => r.text === 'three' && r.state === 'sent')")
    b.wait_rows("rows => rows.length === 3 && rows[2].text === 'three'")
    a.page.reload()  # what the page shows now is stored again
    a.page.wait_for_selector("[data-testid=chat]:not([hidden])")  # the reload comes back to the open chat
    a.wait_rows("rows => rows.map(r => r.text).join() === 'one,two,three'")
    assert a.page.is_hidden("[data-testid=storage-banner]")
