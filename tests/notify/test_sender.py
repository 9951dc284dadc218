"""The NotificationService's sender (qim/services/notify/sender.py; docs/decisions/0135)
through the real FCM and Web Push providers against their local endpoints, with the
registrations on a real Redis: a provider's "unregistered" answer removes the device's
registration (the store's conditional remove) and ends the delivery `unregistered`; a
429 is retried no sooner than its Retry-After and then `sent`; a device whose provider
has no credentials here ends `failed`; a full queue holds `submit` (back-pressure)."""

from __future__ import annotations

import asyncio
import time

import pytest

from qim.infra.redis.client import connect
from qim.notify.providers.base import Alert, Notification, Registration, RetryPolicy
from qim.proto.v1 import push_pb2
from qim.services.notify.metrics import NotifyMetrics
from qim.services.notify.sender import Delivery, Sender
from qim.stores.redis.push import RedisPushRegistrations

T, ME = 0, 42
FCM_TOKEN = "fcm-registration-token-1"


@pytest.fixture
async def push_store(private_redis):
    client = connect(private_redis.addr)
    yield RedisPushRegistrations(client)
    await client.aclose()


def delivery(registration: Registration, device: int, token: str) -> Delivery:
    note = Notification(registration, Alert(badge=3, badge_version=9, collapse_id="ab" * 16, body="hi"))
    return Delivery(T, ME, device, token, note, asyncio.get_running_loop().create_future())


async def test_unregistered_removes_the_registration_and_a_429_waits_its_retry_after(fcm, webpush, push_store):
    fcm_provider, fcm_fake = fcm
    wp_provider, wp_fake, subscription = webpush
    await push_store.put(T, ME, push_pb2.PushRegistration(device_id=1, settings=push_pb2.PushRegister(
        provider=push_pb2.PUSH_PROVIDER_FCM, token=FCM_TOKEN)))
    metrics = NotifyMetrics()
    sender = Sender({"fcm": fcm_provider, "webpush": wp_provider}, push_store, metrics,
                    RetryPolicy(start=0.01, rand=lambda: 1.0), workers=4)
    sender.start()
    try:
        fcm_fake.mode = "410"  # FCM's 404 UNREGISTERED
        gone = delivery(Registration("fcm", token=FCM_TOKEN), 1, FCM_TOKEN)
        await sender.submit(gone)
        assert await asyncio.wait_for(gone.done, 30) == "unregistered"
        assert (await push_store.registrations(T, ME))[0] == []

        wp_fake.mode, wp_fake.retry_after = "429", "1"
        slowed = delivery(Registration("webpush", subscription=subscription), 2, subscription["endpoint"])
        began = time.monotonic()
        await sender.submit(slowed)
        while not wp_fake.received:  # noqa: ASYNC110 (the endpoint's record, no event)
            await asyncio.sleep(0.01)
        wp_fake.mode = "ok"
        assert await asyncio.wait_for(slowed.done, 30) == "sent"
        assert time.monotonic() - began >= 1.0, "retried before the push service's Retry-After"
        assert len(wp_fake.received) == 2
        assert metrics.retries.labels("webpush")._value.get() == 1

        apns_off = delivery(Registration("apns", token="ab" * 32), 3, "ab" * 32)
        await sender.submit(apns_off)
        assert await asyncio.wait_for(apns_off.done, 30) == "failed"
    finally:
        await sender.close()


async def test_a_full_queue_holds_submit(push_store):
    sender = Sender({}, push_store, NotifyMetrics(), queue_limit=2, workers=1)  # not started: nothing drains
    first = [delivery(Registration("fcm", token="t"), d, "t") for d in (1, 2)]
    for d in first:
        await sender.submit(d)
    held = asyncio.ensure_future(sender.submit(delivery(Registration("fcm", token="t"), 3, "t")))
    await asyncio.sleep(0.2)
    assert not held.done(), "a third delivery was queued past the bound"
    sender.start()  # the worker drains: the held submit goes in, every delivery ends (no provider: failed)
    await asyncio.wait_for(held, 30)
    assert [await asyncio.wait_for(d.done, 30) for d in first] == ["failed", "failed"]
    await sender.close()
