"""Web Push on the page, end to end (issue 39; docs/decisions/0143): the page's "Notify me
when offline" control registers the browser's subscription for its device, the REAL
NotificationService (a `qim-notify` process on the session stack's engines, Web Push
configured with a VAPID key made here) sends the offline tab's device exactly one
encrypted alert per message with the exact absolute badge, to a local RFC 8030 push
service that checks VAPID and decrypts the payload (tests/notify/fakes/webpush.py); a
read on another device sends a silent update with a higher badge_version; the page's
service worker shows the alert the server sent, badges the silent one and then ignores
the older alert; signing out unregisters. Headless Chromium reaches no browser vendor's
push service, so the subscription is given to the page (`window.qimTestPushSubscription`,
pushview.ts); everything else runs as for a person. No VAPID key: the control is shown
disabled, saying offline notifications are not set up on this server. Refusals
(permission not granted, a subscription the rules refuse, a push service that refuses to
subscribe, named as such) are said once, beside the control."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from qim.dev._proc import death_wrapper
from qim.dev.certs import CLIENT_PORT, ensure_dev_pki
from qim.dev.webserver import serve, vapid_public_key
from tests.badge.audit import badge_store, stored
from tests.notify.fakes.webpush import FakePushService, raw_public
from tests.web.conftest import gateway_ws_url
from tests.web.harness import DIST, SdkPeer, WebPage, new_user

DEADLINE_S = 120.0  # the projection, the badge settler and the notify batch on a busy machine
OFFLINE_S = 5.0  # a closed tab's presence tombstone reaching qim-notify (Kafka, a busy machine)
TOGGLE = "[data-testid=push-toggle]"
STATUS = "[data-testid=push-status]"


def eventually(check: Any, what: str, timeout: float = DEADLINE_S) -> Any:
    """Poll `check()` until it returns something truthy; AssertionError naming `what`."""
    deadline = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.2)
    return got


class PushService:
    """FakePushService (HTTPS, a private CA) on a loop thread of its own."""

    def __init__(self, base: Path) -> None:
        pki = ensure_dev_pki(base / "pki", services=())
        files = pki.files(CLIENT_PORT)
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(files.cert, files.key)
        self.ca_file = pki.ca_file
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="fake-push-service")
        self.thread.start()
        self.fake = FakePushService(tls)
        asyncio.run_coroutine_threadsafe(self.fake.start(), self.loop).result(30)

    def payloads(self, endpoint: str) -> list[dict]:
        """The decrypted payloads (with headers) accepted for the subscription `endpoint`."""
        sub = endpoint.rsplit("/", 1)[1]
        return [r for r in list(self.fake.received) if r["sub"] == sub]

    def stop(self) -> None:
        """Stop serving and the loop."""
        asyncio.run_coroutine_threadsafe(self.fake.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)


@pytest.fixture(scope="module")
def web_push(stack, tmp_path_factory):
    """(qim-web's URL with a VAPID key in /config.json, the key, the push service)."""
    if not (DIST / "sw.js").is_file():
        pytest.fail(f"{DIST}/sw.js is missing: run `make web-build`", pytrace=False)
    base = tmp_path_factory.mktemp("webpush")
    vapid = ec.generate_private_key(ec.SECP256R1())
    pem = vapid.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()).decode()
    (base / "vapid.pem").write_text(pem)
    service = PushService(base)
    httpd = serve("127.0.0.1", 0, DIST, gateway_ws_url(stack), stack.token_key, vapid_public=vapid_public_key(pem))
    yield f"http://127.0.0.1:{int(httpd.server_address[1])}/", vapid, base, service
    httpd.shutdown()
    service.stop()


@contextlib.contextmanager
def notify_node(stack: Any, base: Path, service: PushService) -> Iterator[None]:
    """One `qim-notify` on the session stack's engines, Web Push to `service` (its own
    process, stopped by its pid); waits until its /healthz answers 200."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        metrics = f"127.0.0.1:{s.getsockname()[1]}"
    env = {**os.environ, **stack.env, "QIM_NOTIFY_METRICS_LISTEN": metrics, "QIM_NODE_NAME": "notify-webpush",
           "QIM_PUSH_VAPID_PRIVATE_KEY_FILE": str(base / "vapid.pem"), "QIM_PUSH_VAPID_SUBJECT": "mailto:ops@example.com",
           "QIM_PUSH_VAPID_CA_FILE": service.ca_file, "QIM_NOTIFY_CLAIM_MS": "3000", "PYTHONUNBUFFERED": "1"}
    log = open(base / "notify.log", "wb")
    proc = subprocess.Popen([*death_wrapper(True), sys.executable, "-m", "qim.app", "notify"], env=env, cwd=base,
                            stdout=log, stderr=subprocess.STDOUT)

    def healthy() -> bool:
        assert proc.poll() is None, f"qim-notify exited: {(base / 'notify.log').read_text()[-2000:]}"
        try:
            return urllib.request.urlopen(f"http://{metrics}/healthz", timeout=2).status == 200
        except OSError:
            return False
    try:
        eventually(healthy, "qim-notify healthy")
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def turn_on(page: WebPage, subscription: dict) -> None:
    """Give the page `subscription` (the test hook) and press "Notify me when offline"."""
    page.page.evaluate("s => { window.qimTestPushSubscription = s; }", subscription)
    assert page.page.text_content(TOGGLE) == "Notify me when offline"
    page.page.click(TOGGLE)
    page.page.wait_for_selector(f"{TOGGLE}[data-state=on]")


def test_an_offline_tab_gets_one_alert_with_the_exact_badge_then_a_silent_update(stack, engines, browser, web_push):
    url, vapid, base, service = web_push
    a, me = new_user(), new_user()
    sender, other = SdkPeer(stack, base / f"a{a}", a), SdkPeer(stack, base / f"me{me}", me)  # `other`: device 1
    ctx = browser.new_context(permissions=["notifications"], viewport={"width": 900, "height": 620})
    node = contextlib.ExitStack()
    try:
        # started first: a first start reads the dispatch log from its oldest record (0135), so the
        # session's backlog is behind it by the time the message below is sent
        node.enter_context(notify_node(stack, base, service))
        tab = WebPage(ctx.new_page(), me).sign_in(url, "Mo")
        device = int(tab.page.evaluate("() => sessionStorage.getItem('qim.device')"))
        subscription = service.fake.subscribe(raw_public(vapid))
        endpoint = subscription["endpoint"]
        turn_on(tab, subscription)
        tab.shot("push-on")
        regs = other.run(other.client.push.list())
        assert [(r.device_id, r.provider, r.token, r.webpush_p256dh, r.content) for r in regs] == [
            (device, "webpush", endpoint, subscription["keys"]["p256dh"], True)]
        tab.page.close()  # the tab's device goes offline
        time.sleep(OFFLINE_S)
        direct = sender.run(sender.client.open_direct(me)).conversation_id
        ack = sender.run(sender.client.send_text(direct, "hello, are you there?"))
        alert = eventually(lambda: service.payloads(endpoint), "the alert at the push service")[0]
        body = alert["payload"]
        badge, version = other.run(stored(badge_store(engines), me))
        assert (badge, version) == (1, int(body["badge_version"]))
        assert body["title"]  # the service's words (a fixed text or the sender's name): not the page's
        assert {k: v for k, v in body.items() if k != "title"} == {
            "badge": "1", "badge_version": str(version), "conversation": direct.hex(), "silent": "0",
            "message": ack.message_id.hex(), "body": "hello, are you there?"}
        assert (alert["topic"], alert["urgency"]) == (direct.hex(), "high")

        eventually(lambda: other.bodies(direct) == [b"hello, are you there?"], "the message on device 1")
        other.run(other.client.mark_read(direct))  # read on another device: the badge falls to 0
        silent = eventually(lambda: [p for p in service.payloads(endpoint) if p["payload"]["silent"] == "1"],
                            "the silent badge update")[0]["payload"]
        assert silent["badge"] == "0" and int(silent["badge_version"]) > version, silent
        alerts = [p for p in service.payloads(endpoint) if p["payload"]["silent"] == "0"]
        assert len(alerts) == 1, alerts  # exactly one alert for the one message
        node.close()

        # what the server sent, handed to the page's service worker as the browser would
        again = WebPage(ctx.new_page(), me)
        again.page.goto(url)
        worker = next(w for w in ctx.service_workers if w.url == url + "sw.js")
        handle = "p => self.qimHandlePush(p)"
        assert worker.evaluate(handle, json.dumps(body)) == {"show": True, "badge": True, "stale": False}
        notes = worker.evaluate("async () => (await self.registration.getNotifications()).map(n => [n.tag, n.title, "
                                "n.body])")
        assert notes == [[direct.hex(), body["title"], "hello, are you there?"]]
        assert worker.evaluate(handle, json.dumps(silent)) == {"show": False, "badge": True, "stale": False}
        assert worker.evaluate(handle, json.dumps(body))["stale"] is True  # the late alert: older than the read

        # a notification's click opens the page at its conversation (sw.ts conversationUrl)
        again.sign_in(f"{url}?conversation={direct.hex()}", "Mo", device)
        again.page.wait_for_selector(f"[data-testid=chat-title][data-conversation='{direct.hex()}']")
        assert "conversation=" not in again.page.url  # a reload does not open it again
        # sign-out unregisters the device (QIM has no logout frame: decision 0128)
        turn_on(again, subscription)
        assert [r.device_id for r in other.run(other.client.push.list())] == [device]
        again.page.click(TOGGLE)  # "Stop offline notifications" unregisters
        again.page.wait_for_selector(f"{TOGGLE}[data-state=off]")
        assert other.run(other.client.push.list()) == []
        turn_on(again, subscription)
        assert [r.device_id for r in other.run(other.client.push.list())] == [device]
        again.page.click("#logout")
        again.page.wait_for_selector("[data-testid=login-form]", state="visible")
        eventually(lambda: other.run(other.client.push.list()) == [], "the registration removed at sign-out")
    finally:
        node.close()
        ctx.close()
        sender.close()
        other.close()


def test_a_refusal_is_said_on_the_page(stack, browser, web_push, pages):
    url, vapid, base, service = web_push
    # the session's qim-web publishes no VAPID key: the control is there, disabled, saying why
    p = pages(new_user(), "Nokey")
    p.page.wait_for_selector(f"{TOGGLE}[data-state=unavailable]")
    assert p.page.is_disabled(TOGGLE)
    assert p.page.text_content(STATUS) == "Offline notifications are not set up on this server."
    assert "QIM_PUSH_VAPID_PRIVATE_KEY_FILE" in p.page.get_attribute(STATUS, "title")  # how, for the operator

    # a browser without the Push API gets no control at all
    ctx = browser.new_context()
    try:
        ctx.add_init_script("delete window.PushManager;")
        tab = WebPage(ctx.new_page(), new_user()).sign_in(url, "Nopush")
        assert tab.page.query_selector(TOGGLE) is None
    finally:
        ctx.close()

    # permission not granted (headless Chromium denies a prompt nobody answers)
    ctx = browser.new_context()
    try:
        tab = WebPage(ctx.new_page(), new_user()).sign_in(url, "Noperm")
        tab.page.click(TOGGLE)
        tab.page.wait_for_selector(f"{STATUS}[data-state=refused]")
        assert tab.page.text_content(STATUS).startswith("Notifications"), tab.page.text_content(STATUS)
        tab.shot("push-refused")
    finally:
        ctx.close()

    # a subscription the registration rules refuse (PushInvalid), said with the rule
    ctx = browser.new_context(permissions=["notifications"])
    try:
        tab = WebPage(ctx.new_page(), new_user()).sign_in(url, "Badsub")
        sub = service.fake.subscribe(raw_public(vapid))
        tab.page.evaluate("s => { window.qimTestPushSubscription = s; }",
                          {**sub, "endpoint": "http://push.example.com/x"})
        tab.page.click(TOGGLE)
        tab.page.wait_for_selector(f"{STATUS}[data-state=refused]")
        assert tab.page.text_content(STATUS) == ("The server refused this browser's push subscription: "
                                                 "webpush endpoint must be https (http only for a loopback host)")
        assert "refused" not in (tab.page.text_content("[data-testid=error]") or "")  # said once, beside the control
    finally:
        ctx.close()

    # permission granted, but the browser's push service refuses to subscribe (headless Chromium
    # reaches none): the push service is named, with the browser's words; said once
    ctx = browser.new_context(permissions=["notifications"])
    try:
        tab = WebPage(ctx.new_page(), new_user()).sign_in(url, "Nopushservice")
        tab.page.click(TOGGLE)
        tab.page.wait_for_selector(f"{STATUS}[data-state=refused]", timeout=60_000)
        said = tab.page.text_content(STATUS)
        head = "Offline notifications could not be turned on: this browser could not subscribe to its push service: "
        assert said.startswith(head) and len(said) > len(head), said  # the browser's own words follow
        assert "push service" not in (tab.page.text_content("[data-testid=error]") or "")
    finally:
        ctx.close()
