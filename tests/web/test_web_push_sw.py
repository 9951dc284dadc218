"""The page's service worker (web/src/app/sw.ts, docs/decisions/0143) in headless Chromium,
without a stack: qim-web serves web/dist, the page registers /sw.js, and QIM push
payloads reach it — a real push event delivered by Chromium's DevTools protocol
(ServiceWorker.deliverPushMessage: the browser's own push path after decryption) and the
worker's `qimHandlePush` hook (the same handler, returning its decision). Checked in the
worker itself (`self.registration.getNotifications()`, its IndexedDB): an alert shows one
notification per conversation (tag) with the payload's title and body, a newer alert of
the conversation replaces it, a push with an older badge_version than seen is ignored
whole, a silent update shows nothing but records the badge, a payload that is not QIM's
fails the push (no notification)."""

from __future__ import annotations

import json
import time

import pytest

from qim.dev.webserver import serve
from tests.web.harness import DIST

DEADLINE_S = 30.0
NOTES_JS = """async () => (await self.registration.getNotifications()).map(n => ({title: n.title, body: n.body,
    tag: n.tag, version: n.data.badgeVersion, badge: n.data.badge}))"""
STATE_JS = """() => new Promise((resolve, reject) => { const r = indexedDB.open('qim-push', 1);
    r.onsuccess = () => { const g = r.result.transaction('badge').objectStore('badge').get('');
      g.onsuccess = () => { r.result.close(); resolve(g.result ?? null); }; g.onerror = () => reject(g.error); };
    r.onerror = () => reject(r.error); })"""


def alert(conversation: str, badge: int, version: int, body: str, message: str = "01") -> dict:
    """The cleartext qim-notify sends for an alert (qim/notify/providers/webpush.py `message`)."""
    return {"badge": str(badge), "badge_version": str(version), "conversation": conversation, "silent": "0",
            "message": message, "title": "New message", "body": body}


@pytest.fixture
def sw_page(browser):
    """(page, worker, deliver): a page of qim-web with /sw.js registered and active, and
    `deliver(payload)` dispatching a real push event to it over the DevTools protocol."""
    if not (DIST / "sw.js").is_file():
        pytest.fail(f"{DIST}/sw.js is missing: run `make web-build`", pytrace=False)
    httpd = serve("127.0.0.1", 0, DIST, "ws://127.0.0.1:9/ws", None)  # no gateway is needed
    origin = f"http://127.0.0.1:{int(httpd.server_address[1])}"
    ctx = browser.new_context(permissions=["notifications"])
    try:
        page = ctx.new_page()
        page.goto(origin + "/")
        scope = page.evaluate("""async () => { const r = await navigator.serviceWorker.register('/sw.js',
            {scope: '/'}); await navigator.serviceWorker.ready; return r.scope; }""")
        assert scope == origin + "/"
        worker = next(w for w in ctx.service_workers if w.url == origin + "/sw.js")
        cdp = ctx.new_cdp_session(page)
        regs: list[dict] = []
        cdp.on("ServiceWorker.workerRegistrationUpdated", lambda e: regs.extend(e["registrations"]))
        cdp.send("ServiceWorker.enable")
        deadline = time.monotonic() + DEADLINE_S
        while not any(r["scopeURL"] == scope and not r["isDeleted"] for r in regs):
            assert time.monotonic() < deadline, f"no registration event for {scope}: {regs}"
            page.wait_for_timeout(100)  # lets Playwright's loop deliver the CDP events
        reg_id = next(r["registrationId"] for r in regs if r["scopeURL"] == scope)

        def deliver(payload: dict | str) -> None:
            data = payload if isinstance(payload, str) else json.dumps(payload)
            cdp.send("ServiceWorker.deliverPushMessage", {"origin": origin, "registrationId": reg_id, "data": data})

        yield page, worker, deliver
    finally:
        ctx.close()
        httpd.shutdown()


def wait_notes(page, worker, predicate, what: str) -> list[dict]:
    """The worker's notifications once `predicate(notes)` holds; AssertionError after DEADLINE_S."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        notes = worker.evaluate(NOTES_JS)
        if predicate(notes):
            return notes
        assert time.monotonic() < deadline, f"{what}: the worker shows {notes}"
        page.wait_for_timeout(100)


def test_the_worker_shows_alerts_per_conversation_and_ignores_an_older_badge(sw_page):
    page, worker, deliver = sw_page
    deliver(alert("c1", 2, 7, "hello"))  # a real push event
    notes = wait_notes(page, worker, lambda n: len(n) == 1, "the first alert's notification")
    assert notes == [{"title": "New message", "body": "hello", "tag": "c1", "version": 7, "badge": 2}]
    assert worker.evaluate(STATE_JS) == {"version": 7, "badge": 2}

    deliver(alert("c1", 3, 9, "hello again"))  # the conversation's newer alert replaces the older
    wait_notes(page, worker, lambda n: [x["body"] for x in n] == ["hello again"], "the replacing alert")

    # a late push (version 8 < 9) is ignored whole: no notification for c2, the badge kept
    late = worker.evaluate("p => self.qimHandlePush(p)", json.dumps(alert("c2", 1, 8, "late")))
    assert late == {"show": False, "badge": False, "stale": True}
    assert worker.evaluate(STATE_JS) == {"version": 9, "badge": 3}
    assert [n["tag"] for n in worker.evaluate(NOTES_JS)] == ["c1"]

    # a silent update (a read elsewhere): no notification, the newer badge recorded
    silent = {"badge": "0", "badge_version": "10", "conversation": "", "silent": "1"}
    assert worker.evaluate("p => self.qimHandlePush(p)", json.dumps(silent)) == {
        "show": False, "badge": True, "stale": False}
    assert worker.evaluate(STATE_JS) == {"version": 10, "badge": 0}
    assert [n["body"] for n in worker.evaluate(NOTES_JS)] == ["hello again"]

    # an alert of another conversation after it shows beside the first
    deliver(alert("c3", 1, 11, "other chat"))
    notes = wait_notes(page, worker, lambda n: len(n) == 2, "the second conversation's alert")
    assert sorted((n["tag"], n["body"], n["version"]) for n in notes) == [("c1", "hello again", 9),
                                                                         ("c3", "other chat", 11)]


def test_a_payload_that_is_not_qims_shows_nothing(sw_page):
    page, worker, deliver = sw_page
    for bad, why in (("not json", "not JSON"), (json.dumps({"badge": "x", "badge_version": "1"}), "badge"),
                     (json.dumps(alert("C1", 1, 1, "upper-case id")), "hex")):
        with pytest.raises(Exception, match=why):
            worker.evaluate("p => self.qimHandlePush(p)", bad)
    deliver("not json either")  # the real push event fails the same way
    deliver(alert("c9", 1, 2, "after the bad ones"))
    notes = wait_notes(page, worker, lambda n: len(n) >= 1, "the good alert")
    assert [n["body"] for n in notes] == ["after the bad ones"]
    assert worker.evaluate(STATE_JS) == {"version": 2, "badge": 1}
