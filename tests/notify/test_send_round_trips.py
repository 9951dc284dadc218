"""The NotificationService reads and records the badge versions of a batch's alerts in
one round trip per Redis instance, not one per user (docs/decisions/0145: at capacity a
batch of 200 alerts to about 170 users waited for 170 script calls one after another),
on a real Redis, and each alert still carries the newest badge its device was sent
(decision 0135, 7): LogConsumer._send with the real NotifyStore and BadgeStore, a
sender that accepts at once."""

from __future__ import annotations

import asyncio
import secrets
import time
from types import SimpleNamespace

import pytest

from qim.infra.redis.client import connect
from qim.proto.v1 import message_pb2, push_pb2
from qim.services.notify.consumer import LogConsumer
from qim.services.notify.due import Candidate, Due
from qim.services.notify.metrics import NotifyMetrics
from qim.stores.notify import AlertKey
from qim.stores.redis.badges import RedisBadgeStore
from qim.stores.redis.notify import RedisNotifyStore, alert_key
from qim.stores.redis.scripts import Scripts, load_source

T, USERS, SENDER = 0, 30, 1


class Names:
    """The senders' display names and groups' titles (none: the alerts say "User <id>")."""

    async def display_names(self, tenant, users):
        return ["" for _ in users]

    async def member_views(self, tenant, user, groups):
        return []


class Accepting:
    """A Sender whose provider accepts every alert at once; `alerts` what it was given."""

    def __init__(self) -> None:
        self.alerts: dict[int, object] = {}

    async def submit(self, dl) -> None:
        self.alerts[dl.user] = dl.notification.alert
        dl.done.set_result("sent")


@pytest.fixture
async def redis(private_redis):
    client = connect(private_redis.addr)
    yield client
    await client.aclose()


def due(user: int) -> Due:
    conv = bytes([1]) + user.to_bytes(15, "big")
    reg = push_pb2.PushRegistration(device_id=1, settings=push_pb2.PushRegister(
        provider=push_pb2.PUSH_PROVIDER_APNS, token=secrets.token_hex(32)))
    cand = Candidate(T, user, conv, secrets.token_bytes(16), 5, int(time.time() * 1000), SENDER)
    return Due(cand, reg, message_pb2.MessageRecord(sender_id=SENDER, conversation_seq=5, body=b"hi"), "due")


async def test_a_batch_records_its_badge_versions_in_one_round_trip(redis, monkeypatch):
    notify, sender = RedisNotifyStore(redis), Accepting()
    consumer = LogConsumer("127.0.0.1:1", SimpleNamespace(sessions=Names(), groups=Names()), RedisBadgeStore(redis),
                           notify, sender, NotifyMetrics(), lambda t, u, d: False, lambda t, u: True)
    users = [2000 + i for i in range(USERS)]
    # the first user's phone was already sent badge 4 at version 9 (a silent update, say)
    assert await notify.badge_versions(T, users[0], [(1, 9, 4)], silent=True) == [(9, 4)]
    await redis.script_load(load_source("notify_sent"))  # a NOSCRIPT reload is no alert's cost
    badge_trips, sent_trips = [], []
    pipeline = Scripts._pipeline

    async def counted(self, batch):
        if any(name == "notify_badge" for name, *_ in batch):
            badge_trips.append(len(batch))
        if any(name == "notify_sent" for name, *_ in batch):
            sent_trips.append(len(batch))
        return await pipeline(self, batch)
    monkeypatch.setattr(Scripts, "_pipeline", counted)
    try:
        await consumer._send(T, [due(u) for u in users])
    finally:
        await consumer.close()  # its Kafka client (never used here) stops retrying its bootstrap
    assert len(sender.alerts) == USERS
    got = {u: (a.badge, a.badge_version) for u, a in sender.alerts.items()}
    assert got[users[0]] == (4, 9), "an alert carries the newer badge its device was sent"
    assert all(got[u] == (0, 0) for u in users[1:]), got
    assert badge_trips == [USERS], f"badge version round trips (calls in each): {badge_trips}"
    # each alert is recorded as made as soon as it ended; those ending in one loop turn
    # share one round trip (issue 39's open item: one round trip per alert)
    assert sent_trips == [USERS], f"sent record round trips (calls in each): {sent_trips}"
    made = [await redis.get(alert_key(T, AlertKey(u, 1, bytes.fromhex(a.message_id)))) for u, a in sender.alerts.items()]
    assert made == [b"s"] * USERS


async def test_the_claim_checks_of_alerts_of_one_loop_turn_share_a_round_trip(redis, monkeypatch):
    notify = RedisNotifyStore(redis)
    keys = [AlertKey(3000 + i, 1, secrets.token_bytes(16)) for i in range(USERS)]
    states = await notify.claim(T, keys, 60_000, token="cA")
    assert states == ["new"] * USERS
    await redis.script_load(load_source("notify_claim_renew"))  # a NOSCRIPT reload is no alert's cost
    trips = []
    pipeline = Scripts._pipeline

    async def counted(self, batch):
        trips.append([name for name, *_ in batch])
        return await pipeline(self, batch)
    monkeypatch.setattr(Scripts, "_pipeline", counted)
    got = await asyncio.gather(*(notify.renew(T, k, "cA" if i % 2 else "cB", 60_000) for i, k in enumerate(keys)))
    assert got == [bool(i % 2) for i in range(USERS)]  # only the holder of the claim may send
    assert trips == [["notify_claim_renew"] * USERS]
