"""The NotificationService end to end (issue 39; docs/decisions/0135): a private stack
with two qim-notify nodes (one Kafka consumer group over the dispatch log) sending to a
local APNs endpoint (tests/notify/servicefakes.py). Each test has users of its own; a
"phone" registers an APNs token and disconnects (offline), a "laptop" stays connected.

- an offline device gets exactly one alert per unread message, each with the exact
  absolute badge (the server's UserBadgeState at that point); an online device none;
- a muted group stays silent, except a message that mentions the user;
- a read on the other device sends the phone a silent badge update (badge 0, a higher
  version than its last alert); a recall lowers the badge the same way;
- a 410 from APNs removes the registration (PUSH_LIST no longer shows it);
- a notify node SIGKILLed under traffic: every alert still made, none twice (counted per
  (device, message) at the endpoint)."""

from __future__ import annotations

import asyncio
import secrets

import pytest

from tests.badge.audit import badge_store, stored
from tests.e2e.sdkclient import client, close_all
from tests.fixtures import running_stack
from tests.notify.pushfixtures import TOPIC
from tests.notify.servicefakes import ThreadedApns
from tests.sdk.realstack import eventually, users

DEADLINE_S = 120.0  # the projection, the settler and the notify batch on a busy machine
OFFLINE_S = 3.0  # a closed connection's presence tombstone reaching the notify nodes


@pytest.fixture(scope="module")
def apns(tmp_path_factory):
    server = ThreadedApns().start(tmp_path_factory.mktemp("apns"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def push_stack(tmp_path_factory, apns):
    """A stack with two qim-notify nodes sending to `apns`."""
    env = {**apns.env, "QIM_NOTIFY_CLAIM_MS": "3000"}
    with running_stack(tmp_path_factory.mktemp("notify"), extra_env=env, nodes={"notify": 2}) as st:
        yield st


async def register(c) -> str:
    """Register `c` for APNs (production, the test topic) with a fresh token; the token."""
    token = secrets.token_hex(32)
    await c.push.register("apns", token, apns_topic=TOPIC, apns_environment="production")
    return token


class Phone:
    """A user's device registered for APNs, then disconnected."""

    def __init__(self, token: str) -> None:
        self.token = token


async def offline_phone(st, tmp_path, user: int, device: int = 1) -> Phone:
    phone = await client(st, tmp_path, user, device)
    await phone.connect()
    token = await register(phone)
    await phone.close()
    return Phone(token)


async def test_offline_gets_one_alert_per_message_with_the_exact_badge_online_none(push_stack, apns, tmp_path):
    st = push_stack
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
        await eventually(lambda: len(apns.alerts(phone.token)) == n, DEADLINE_S, f"alert {n} at the phone")
        last = apns.alerts(phone.token)[-1]
        assert last["qim"]["message"] == sent[-1]
        assert last["aps"]["badge"] == n, last  # the exact absolute badge: n unread
        badge, version = await stored(store, me)
        assert (badge, version) == (n, last["qim"]["badge_version"])
    assert apns.per_message(phone.token) == {m: 1 for m in sent}
    assert apns.alerts(laptop_token) == []
    await close_all(sender, laptop)


async def test_a_muted_group_is_silent_except_a_mention(push_stack, apns, tmp_path):
    st = push_stack
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


async def test_a_read_elsewhere_and_a_recall_send_silent_badge_updates(push_stack, apns, tmp_path):
    st = push_stack
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


async def test_a_410_removes_the_registration(push_stack, apns, tmp_path):
    st = push_stack
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


async def test_a_notify_node_killed_under_traffic_loses_no_alert_and_doubles_none(push_stack, apns, tmp_path):
    st = push_stack
    a, *them = users(7)
    phones = [await offline_phone(st, tmp_path, u, 1) for u in them]
    sender = await client(st, tmp_path, a)
    await sender.connect()
    await asyncio.sleep(OFFLINE_S)
    convs = [(await sender.open_direct(u)).conversation_id for u in them]
    sent: list[list[str]] = [[] for _ in them]
    for rnd in range(8):
        for i, conv in enumerate(convs):
            sent[i].append((await sender.send_text(conv, f"r{rnd}")).message_id.hex())
        if rnd == 3:
            await asyncio.to_thread(st.kill_service, "notify2")
    for i, phone in enumerate(phones):
        await eventually(lambda: set(apns.per_message(phone.token)) >= set(sent[i]), DEADLINE_S * 2,
                         f"every alert of user {i} after the kill")
    for i, phone in enumerate(phones):
        assert apns.per_message(phone.token) == {m: 1 for m in sent[i]}, f"user {i}: a lost or doubled alert"
    await close_all(sender)
