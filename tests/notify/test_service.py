"""The NotificationService end to end (issue 39; docs/decisions/0135): a private stack
with two qim-notify nodes (one Kafka consumer group over the dispatch log) sending to a
local APNs endpoint (tests/notify/conftest.py `push_stack`, `apns_endpoint`). Each test
has users of its own; a "phone" registers an APNs token and disconnects (offline), a
"laptop" stays connected.

- an offline device gets exactly one alert per unread message, each with the exact
  absolute badge (the server's UserBadgeState at that point); an online device none;
- a muted group stays silent, except a message that mentions the user;
- a read on the other device sends the phone a silent badge update (badge 0, a higher
  version than its last alert); a recall lowers the badge the same way;
- a mute, a leave and an operator delete lower the badge by silent updates too;
- a 410 from APNs removes the registration (PUSH_LIST no longer shows it).
A notify node killed: test_service_kill.py."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import urllib.request

from tests.badge.audit import badge_store, stored
from tests.e2e.sdkclient import client, close_all
from tests.notify.servicefakes import DEADLINE_S, OFFLINE_S, offline_phone, register
from tests.sdk.realstack import eventually, users


async def test_offline_gets_one_alert_per_message_with_the_exact_badge_online_none(push_stack, apns_endpoint, tmp_path):
    st, apns = push_stack, apns_endpoint
    a, me = users(2)
    phone = await offline_phone(st, tmp_path, me, 1)
    sender, laptop = await client(st, tmp_path, a), await client(st, tmp_path, me, 2)
    for c in (sender, laptop):
        await c.connect()
    laptop_token = await register(laptop)  # registered and connected: no alert
    await asyncio.sleep(OFFLINE_S)
    store = badge_store(st.engines)
    direct = (await sender.open_direct(me)).conversation_id
    sent = []
    for n in (1, 2, 3):
        ack = await sender.send_text(direct, f"hello {n}")
        sent.append(ack.message_id.hex())
        await eventually(lambda n=n: len(apns.alerts(phone.token)) == n, DEADLINE_S, f"alert {n} at the phone")
        last = apns.alerts(phone.token)[-1]
        assert last["qim"]["message"] == sent[-1]
        assert last["aps"]["badge"] == n, last  # the exact absolute badge: n unread
        badge, version = await stored(store, me)
        assert (badge, version) == (n, last["qim"]["badge_version"])
    assert apns.per_message(phone.token) == {m: 1 for m in sent}
    assert apns.alerts(laptop_token) == []
    await close_all(sender, laptop)


async def test_a_muted_group_is_silent_except_a_mention(push_stack, apns_endpoint, tmp_path):
    st, apns = push_stack, apns_endpoint
    a, me = users(2)
    phone = await offline_phone(st, tmp_path, me, 1)
    owner, laptop = await client(st, tmp_path, a), await client(st, tmp_path, me, 2)
    for c in (owner, laptop):
        await c.connect()
    group = await owner.create_group([me], title="muted")
    await laptop.mute(group.conversation_id)
    await laptop.close()
    await asyncio.sleep(OFFLINE_S)
    plain = await owner.send_text(group.conversation_id, "no alert for this")
    mention = await owner.send(group.conversation_id, b"you, look", mentions=[me])
    await eventually(lambda: len(apns.alerts(phone.token)) >= 1, DEADLINE_S, "the mention's alert")
    # the plain message is earlier in the same partition: it would have come first
    assert apns.per_message(phone.token) == {mention.message_id.hex(): 1}, plain.message_id.hex()
    assert apns.alerts(phone.token)[0]["aps"]["badge"] == 1  # a muted group with a mention counts once
    await close_all(owner)


async def test_a_read_elsewhere_and_a_recall_send_silent_badge_updates(push_stack, apns_endpoint, tmp_path):
    st, apns = push_stack, apns_endpoint
    a, me = users(2)
    phone = await offline_phone(st, tmp_path, me, 1)
    sender, laptop = await client(st, tmp_path, a), await client(st, tmp_path, me, 2)
    for c in (sender, laptop):
        await c.connect()
    await asyncio.sleep(OFFLINE_S)
    direct = (await sender.open_direct(me)).conversation_id
    await sender.send_text(direct, "one")
    await sender.send_text(direct, "two")
    await eventually(lambda: len(apns.alerts(phone.token)) == 2, DEADLINE_S, "two alerts")
    alert_version = max(p["qim"]["badge_version"] for p in apns.alerts(phone.token))
    await laptop.mark_read(direct)  # read on the other device: the phone's badge falls to 0
    await eventually(lambda: any(s["aps"]["badge"] == 0 for s in apns.silents(phone.token)), DEADLINE_S,
                     "a silent update with badge 0")
    read_update = [s for s in apns.silents(phone.token) if s["aps"]["badge"] == 0][-1]
    assert read_update["qim"]["badge_version"] > alert_version

    third = await sender.send_text(direct, "three")
    await eventually(lambda: len(apns.alerts(phone.token)) == 3, DEADLINE_S, "the third alert")
    assert apns.alerts(phone.token)[-1]["aps"]["badge"] == 1
    third_version = apns.alerts(phone.token)[-1]["qim"]["badge_version"]
    await sender.recall(direct, third.message_id)  # the badge falls again, to 0
    await eventually(lambda: any(s["qim"]["badge_version"] > third_version and s["aps"]["badge"] == 0
                                 for s in apns.silents(phone.token)), DEADLINE_S, "the recall's silent update")
    versions = [p["qim"]["badge_version"] for p in apns.fake.received if p.token == phone.token
                for p in [p.payload]]
    assert versions == sorted(versions), versions  # never an older badge after a newer one
    await close_all(sender, laptop)


async def test_a_410_removes_the_registration(push_stack, apns_endpoint, tmp_path):
    st, apns = push_stack, apns_endpoint
    a, me = users(2)
    phone = await offline_phone(st, tmp_path, me, 1)
    sender, laptop = await client(st, tmp_path, a), await client(st, tmp_path, me, 2)
    for c in (sender, laptop):
        await c.connect()
    assert [r.device_id for r in await laptop.push.list()] == [1]
    await asyncio.sleep(OFFLINE_S)
    apns.fake.mode = "410"
    try:
        await sender.send_text((await sender.open_direct(me)).conversation_id, "to a dead token")

        async def gone() -> bool:
            return await laptop.push.list() == []
        await eventually(gone, DEADLINE_S, "the registration removed after APNs said 410")
    finally:
        apns.fake.mode = "ok"
    assert len(apns.alerts(phone.token)) == 1  # asked once: a permanent answer is not retried
    await close_all(sender, laptop)


def node_metric(st, name: str, metric: str) -> float:
    """An unlabelled metric of node `name` (0 when absent or the node is unreachable)."""
    try:
        text = urllib.request.urlopen(f"http://{st.metrics[name]}/metrics", timeout=3).read().decode()
    except OSError:
        return 0.0
    for line in text.splitlines():
        if line.startswith(metric + " "):
            return float(line.split()[1])
    return 0.0


async def test_a_429_waits_its_retry_after_and_the_log_lags_meanwhile(push_stack, apns_endpoint, tmp_path):
    st, apns = push_stack, apns_endpoint
    a, me = users(2)
    phone = await offline_phone(st, tmp_path, me, 1)
    sender = await client(st, tmp_path, a)
    await sender.connect()
    await asyncio.sleep(OFFLINE_S)
    direct = (await sender.open_direct(me)).conversation_id
    apns.fake.mode, apns.fake.retry_after = "429", "10"

    def lagging() -> float:
        return sum(node_metric(st, n, "qim_notify_lag_records") for n in ("notify", "notify2"))
    try:
        first = (await sender.send_text(direct, "rate limited")).message_id.hex()
        await eventually(lambda: len(apns.alerts(phone.token)) == 1, DEADLINE_S, "the first request (429)")
        apns.fake.mode = "ok"
        later = [(await sender.send_text(direct, f"behind {i}")).message_id.hex() for i in range(3)]
        # Retry-After 10 s from the 429: the batch is held, the log lags (the gauge is read
        # every 2 s), and nothing comes in the next 8 s (a busy machine only delays it)
        lagged = False
        for _ in range(16):
            await asyncio.sleep(0.5)
            lagged = lagged or await asyncio.to_thread(lagging) > 0
            assert len(apns.alerts(phone.token)) == 1, "retried before the provider's Retry-After"
        assert lagged, "qim_notify_lag_records stayed 0 while a batch was held"
        await eventually(lambda: apns.per_message(phone.token) == {m: 1 for m in [first, *later]}, DEADLINE_S,
                         "every message once after the retry")
        await eventually(lambda: lagging() == 0, DEADLINE_S, "the log caught up")
    finally:
        apns.fake.mode, apns.fake.retry_after = "ok", "7"
    await close_all(sender)


async def test_a_leave_a_mute_and_an_operator_delete_each_lower_the_badge_silently(push_stack, apns_endpoint,
                                                                                    tmp_path):
    """Issue 39: every change that lowers the badge reaches the offline phone as a silent
    update with the new absolute badge and a higher version (read and recall: above)."""
    st, apns = push_stack, apns_endpoint
    a, me = users(2)
    phone = await offline_phone(st, tmp_path, me, 1)
    owner, laptop = await client(st, tmp_path, a), await client(st, tmp_path, me, 2)
    for c in (owner, laptop):
        await c.connect()
    muted, left = await owner.create_group([me], title="to mute"), await owner.create_group([me], title="to leave")
    direct = (await owner.open_direct(me)).conversation_id
    await asyncio.sleep(OFFLINE_S)
    await owner.send_text(muted.conversation_id, "m")
    await owner.send_text(left.conversation_id, "l")
    doomed = await owner.send_text(direct, "d")
    await eventually(lambda: len(apns.alerts(phone.token)) == 3, DEADLINE_S, "three alerts")
    assert apns.alerts(phone.token)[-1]["aps"]["badge"] == 3

    def last_version() -> int:
        return max(p.payload["qim"]["badge_version"] for p in apns.fake.received if p.token == phone.token)

    async def falls_to(badge: int, action, why: str) -> None:
        before = last_version()  # read before the action: its update may come before the action returns
        await action()
        await eventually(lambda: any(s["aps"]["badge"] == badge and s["qim"]["badge_version"] > before
                                     for s in apns.silents(phone.token)), DEADLINE_S, why)

    async def operator_delete() -> None:
        env = {**os.environ, **st.client_env()}  # the writer, the CA and qimctl's certificate
        done = await asyncio.to_thread(subprocess.run, [
            sys.executable, "-m", "qim.cli.qimctl", "message", "delete", "--conversation", direct.hex(),
            "--message-id", doomed.message_id.hex(), "--peer", str(me)], env=env, capture_output=True, text=True,
            timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr

    await falls_to(2, lambda: laptop.mute(muted.conversation_id), "the mute's silent update (badge 2)")
    await falls_to(1, lambda: laptop.leave_group(left.group_id), "the leave's silent update (badge 1)")
    await falls_to(0, operator_delete, "the operator delete's silent update (badge 0)")
    versions = [p.payload["qim"]["badge_version"] for p in apns.fake.received if p.token == phone.token]
    assert versions == sorted(versions), versions  # never an older badge after a newer one
    await close_all(owner, laptop)
