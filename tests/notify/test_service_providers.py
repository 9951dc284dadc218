"""The NotificationService end to end through FCM and Web Push (issue 39; docs/decisions/
0135, 0144): a private stack with two qim-notify nodes sending to a local FCM endpoint
(its OAuth2 token endpoint checks the service account's assertion) and a local RFC 8030
push service that checks VAPID and decrypts every payload (tests/notify/serviceproviders.py).

- an offline Android device (FCM) and two offline browsers (Web Push) get exactly one
  alert per unread message, each with the exact absolute badge (the stored
  UserBadgeState and its version); a read on a connected laptop sends each a silent
  update: an FCM data message (no `notification`), a Web Push payload with `silent` "1"
  and no title or body;
- the alert names the sender (its display name, else "User <id>"; a group's title with
  "<sender>: " before the text) and the device's locale picks the fixed strings (en,
  zh-CN); a device registered without content is sent the fixed "New message" only;
- FCM's 404 UNREGISTERED and the push service's 410 remove those registrations;
- an FCM 429 is retried no sooner than its Retry-After."""

from __future__ import annotations

import asyncio

import pytest

from tests.badge.audit import badge_store, stored
from tests.e2e.sdkclient import client, close_all
from tests.notify.servicefakes import DEADLINE_S, OFFLINE_S
from tests.notify.serviceproviders import ThreadedFcmWebPush, android, browser
from tests.sdk.realstack import eventually, users


@pytest.fixture(scope="module")
def fcm_webpush(tmp_path_factory):
    """The local FCM endpoint and push service, in a thread of their own."""
    server = ThreadedFcmWebPush().start(tmp_path_factory.mktemp("fcmweb"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def fw_stack(tmp_path_factory, fcm_webpush):
    """A private stack with two qim-notify nodes sending to `fcm_webpush` (claims of 3 s)."""
    from tests.fixtures import running_stack

    env = {**fcm_webpush.env, "QIM_NOTIFY_CLAIM_MS": "3000"}
    with running_stack(tmp_path_factory.mktemp("notifyfw"), extra_env=env, nodes={"notify": 2}) as st:
        yield st


async def test_fcm_and_web_push_alerts_carry_the_exact_badge_the_sender_and_the_locale(fw_stack, fcm_webpush,
                                                                                          tmp_path):
    st, fw = fw_stack, fcm_webpush
    alice, bob, me = users(3)
    phone = await android(st, tmp_path, me, 1)  # no locale: English
    web = await browser(st, tmp_path, fw, me, 2, locale="zh-CN")
    quiet = await android(st, tmp_path, me, 3, content=False, locale="zh-Hans-CN")
    a = await client(st, tmp_path, alice, display_name="Alice")
    b, laptop = await client(st, tmp_path, bob), await client(st, tmp_path, me, 4)
    for c in (a, b, laptop):
        await c.connect()
    await eventually(lambda: _names(laptop, alice, bob), DEADLINE_S, "Alice's display name kept (bob has none)")
    await asyncio.sleep(OFFLINE_S)
    store = badge_store(st.engines)
    direct = (await a.open_direct(me)).conversation_id
    sent = []
    for n in (1, 2):
        sent.append((await a.send_text(direct, f"hello {n}")).message_id.hex())
        await eventually(lambda n=n: all(len(x) == n for x in _alerts(fw, phone, web, quiet)), DEADLINE_S,
                         f"alert {n} on the three devices")
        badge, version = await stored(store, me)
        assert badge == n
        fcm_msg, web_msg, quiet_msg = (x[-1] for x in _alerts(fw, phone, web, quiet))
        assert fcm_msg["data"] == {"badge": str(n), "badge_version": str(version), "conversation": direct.hex(),
                                   "silent": "0", "message": sent[-1]}
        assert fcm_msg["notification"] == {"title": "Alice", "body": f"hello {n}"}
        assert fcm_msg["android"]["collapse_key"] == direct.hex() and fcm_msg["android"]["priority"] == "high"
        assert web_msg == {"badge": str(n), "badge_version": str(version), "conversation": direct.hex(),
                           "silent": "0", "message": sent[-1], "title": "Alice", "body": f"hello {n}"}
        assert quiet_msg["notification"] == {"body": "新消息"}  # no content: no name, no text
    group = await b.create_group([me], title="Family")
    sent_group = (await b.send_text(group.conversation_id, "dinner")).message_id.hex()
    await eventually(lambda: all(len(x) == 3 for x in _alerts(fw, phone, web, quiet)), DEADLINE_S, "the group alert")
    fcm_msg, web_msg, quiet_msg = (x[-1] for x in _alerts(fw, phone, web, quiet))
    assert fcm_msg["notification"] == {"title": "Family", "body": f"User {bob}: dinner"}
    assert (web_msg["title"], web_msg["body"], web_msg["badge"]) == ("Family", f"用户 {bob}: dinner", "3")
    assert quiet_msg["notification"] == {"body": "新消息"} and quiet_msg["data"]["badge"] == "3"
    for dev in (phone, web, quiet):
        assert fw.per_message(dev) == {m: 1 for m in [*sent, sent_group]}, dev

    alert_version = int(fcm_msg["data"]["badge_version"])
    await laptop.mark_read(direct)  # read elsewhere: the badge falls to 1 (the group's)
    await eventually(lambda: fw.fcm_silents(phone.key) and fw.web_silents(web.key) and fw.fcm_silents(quiet.key),
                     DEADLINE_S, "a silent update to each device")
    for silent in (fw.fcm_silents(phone.key)[-1], fw.fcm_silents(quiet.key)[-1]):
        assert "notification" not in silent and silent["android"]["priority"] == "normal"
        assert silent["data"]["silent"] == "1" and silent["data"]["badge"] == "1"
        assert int(silent["data"]["badge_version"]) > alert_version
    web_silent = fw.web_silents(web.key)[-1]
    assert "title" not in web_silent and "body" not in web_silent and web_silent["badge"] == "1"
    assert int(web_silent["badge_version"]) > alert_version
    assert (await stored(store, me)) == (1, int(web_silent["badge_version"]))
    await close_all(a, b, laptop)


def _names(c, *who: int):
    async def check() -> bool:
        got = await c.display_names(list(who))
        return got.get(who[0]) == "Alice"
    return check()


def _alerts(fw: ThreadedFcmWebPush, phone, web, quiet) -> tuple[list, list, list]:
    return fw.fcm_alerts(phone.key), fw.web_alerts(web.key), fw.fcm_alerts(quiet.key)


async def test_unregistered_and_gone_remove_the_fcm_and_web_push_registrations(fw_stack, fcm_webpush, tmp_path):
    st, fw = fw_stack, fcm_webpush
    a, me = users(2)
    phone = await android(st, tmp_path, me, 1)
    web = await browser(st, tmp_path, fw, me, 2)
    keep = await android(st, tmp_path, me, 3)
    fw.fcm.modes[phone.key] = "410"  # FCM answers 404 UNREGISTERED
    fw.web.modes[web.key] = "410"  # the push service answers 410 Gone
    sender, laptop = await client(st, tmp_path, a), await client(st, tmp_path, me, 4)
    for c in (sender, laptop):
        await c.connect()
    assert [r.device_id for r in await laptop.push.list()] == [1, 2, 3]
    await asyncio.sleep(OFFLINE_S)
    msg = (await sender.send_text((await sender.open_direct(me)).conversation_id, "to dead tokens")).message_id.hex()

    async def only_the_live_one() -> bool:
        return [r.device_id for r in await laptop.push.list()] == [3]
    await eventually(only_the_live_one, DEADLINE_S, "both dead registrations removed")
    # the live device's alert goes beside the dead ones and may land after their removal
    # (CI saw it 0 at this point): wait for it, then it must be exactly one
    await eventually(lambda: fw.per_message(keep) != {}, DEADLINE_S, "the live device's alert")
    assert fw.per_message(keep) == {msg: 1}
    assert len(fw.fcm_asked(phone.key)) == 1  # asked once: a permanent answer is not retried
    assert len([r for r in list(fw.web.received) if r["sub"] == web.key]) == 1
    await close_all(sender, laptop)


async def test_an_fcm_429_is_retried_no_sooner_than_its_retry_after(fw_stack, fcm_webpush, tmp_path):
    st, fw = fw_stack, fcm_webpush
    a, me = users(2)
    phone = await android(st, tmp_path, me, 1)
    sender = await client(st, tmp_path, a)
    await sender.connect()
    await asyncio.sleep(OFFLINE_S)
    fw.fcm.retry_after, fw.fcm.modes[phone.key] = "4", "429"
    try:
        msg = (await sender.send_text((await sender.open_direct(me)).conversation_id, "later")).message_id.hex()
        await eventually(lambda: fw.fcm_asked(phone.key), DEADLINE_S, "the first request (429)")
        del fw.fcm.modes[phone.key]
        await eventually(lambda: fw.per_message(phone) == {msg: 1}, DEADLINE_S, "the alert after the retry")
    finally:
        fw.fcm.modes.pop(phone.key, None)
    first, *_, last = fw.fcm_asked(phone.key)
    # a lower bound only (a busy machine delays the retry, never advances it)
    assert last["_at"] - first["_at"] >= 4.0 - 0.05, "retried before FCM's Retry-After"
    await close_all(sender)
