"""ApnsProvider against the local HTTP/2 APNs endpoint (tests/notify/fakes/apns.py):
the request shape and the provider JWT as APNs checks them, a silent badge update, every
answer mapped onto its Outcome, a hang bounded by the configured timeout, a dropped or
refused connection, and the JWT made anew before Apple's 60 minutes (a hand-moved clock)."""

from __future__ import annotations

import time

import pytest

from qim.notify.providers.apns import ApnsConfig, ApnsProvider
from qim.notify.providers.base import Alert, Notification, Registration
from tests.notify.fakes.apns import FakeApns
from tests.notify.pushfixtures import KEY_ID, TEAM, TOPIC, apns_keys

DEVICE = "a1" * 32
CONV = "0f" * 16


def _note(silent: bool = False, with_content: bool = True) -> Notification:
    alert = Alert(badge=5, badge_version=9, collapse_id=CONV, title="Ann", body="hello", silent=silent, ttl_s=600)
    return Notification(Registration("apns", token=DEVICE, with_content=with_content), alert)


async def test_an_alert_arrives_with_its_headers_payload_and_badge(apns, clock) -> None:
    provider, fake = apns
    assert (await provider.send(_note())).kind == "sent"
    assert fake.rejected == []
    (req,) = fake.received
    assert req.token == DEVICE
    assert req.headers["apns-topic"] == TOPIC and req.headers["apns-push-type"] == "alert"
    assert req.headers["apns-priority"] == "10" and req.headers["apns-collapse-id"] == CONV
    assert req.headers["apns-expiration"] == str(int(clock()) + 600)
    assert req.jwt_header == {"alg": "ES256", "kid": KEY_ID, "typ": "JWT"} and req.claims["iss"] == TEAM
    assert req.payload["aps"] == {"alert": {"title": "Ann", "body": "hello"}, "badge": 5, "sound": "default"}
    assert req.payload["qim"] == {"badge_version": 9, "conversation": CONV}
    assert provider.metrics.value("qim_push_sends_total", {"provider": "apns", "outcome": "sent"}) == 1


async def test_a_content_free_device_gets_the_generic_text(apns) -> None:
    provider, fake = apns
    assert (await provider.send(_note(with_content=False))).kind == "sent"
    assert fake.received[0].payload["aps"]["alert"] == {"body": "New message"}


async def test_a_silent_badge_update_is_a_background_push(apns) -> None:
    provider, fake = apns
    assert (await provider.send(_note(silent=True))).kind == "sent"
    (req,) = fake.received
    assert req.headers["apns-push-type"] == "background" and req.headers["apns-priority"] == "5"
    assert req.payload["aps"] == {"content-available": 1, "badge": 5}


@pytest.mark.parametrize("mode, kind, reason, retry_after", [
    ("410", "permanent", "Unregistered", None),
    ("400", "permanent", "BadDeviceToken", None),
    ("429", "retry_after", "status 429", 7.0),
    ("500", "retry_after", "status 500", None),
])
async def test_answers_map_onto_outcomes(apns, mode, kind, reason, retry_after) -> None:
    provider, fake = apns
    fake.mode = mode
    outcome = await provider.send(_note())
    assert (outcome.kind, outcome.reason, outcome.retry_after_s) == (kind, reason, retry_after)
    assert provider.metrics.value("qim_push_sends_total", {"provider": "apns", "outcome": kind}) == 1


async def test_a_hang_is_a_timeout_within_the_configured_time(apns) -> None:
    provider, fake = apns
    fake.mode = "hang"  # the fake would keep the stream open for a minute
    began = time.monotonic()
    outcome = await provider.send(_note())
    assert (outcome.kind, outcome.retry_reason) == ("retry_after", "timeout")
    assert time.monotonic() - began < 30  # bounded by timeout_s (1.5 s), not by the fake
    assert provider.metrics.value("qim_push_retries_total", {"provider": "apns", "reason": "timeout"}) == 1


async def test_a_dropped_and_a_refused_connection_are_retried(apns) -> None:
    provider, fake = apns
    fake.mode = "close"
    outcome = await provider.send(_note())
    assert (outcome.kind, outcome.retry_reason) == ("retry_after", "unreachable")
    await fake.stop()
    outcome = await provider.send(_note())
    assert (outcome.kind, outcome.retry_reason) == ("retry_after", "unreachable")


async def test_the_provider_token_is_made_anew_before_an_hour(apns, clock) -> None:
    provider, fake = apns
    assert (await provider.send(_note())).kind == "sent"
    clock.advance(2999)
    assert (await provider.send(_note())).kind == "sent"
    assert len(fake.jwts) == 1  # reused: Apple refuses tokens made anew too often
    clock.advance(1)  # 50 minutes: the fake would refuse the old one at 60
    assert (await provider.send(_note())).kind == "sent"
    assert len(fake.jwts) == 2 and fake.received[-1].claims["iat"] == int(clock())
    clock.advance(3000)
    assert (await provider.send(_note())).kind == "sent" and fake.rejected == []
    assert provider.metrics.value("qim_push_credential_refreshes_total", {"provider": "apns"}) == 3


async def test_an_expired_provider_token_is_dropped_and_a_refused_payload_fails(apns) -> None:
    provider, fake = apns
    fake.mode = "403"  # ExpiredProviderToken, as APNs answers a token past its hour
    outcome = await provider.send(_note())
    assert (outcome.kind, outcome.retry_reason, outcome.reason) == ("retry_after", "credential", "ExpiredProviderToken")
    fake.mode = "ok"
    assert (await provider.send(_note())).kind == "sent"
    assert len(fake.jwts) == 2  # signed anew although the clock did not move
    fake.mode = "413"  # the request itself is refused: failed, the registration stays
    outcome = await provider.send(_note())
    assert (outcome.kind, outcome.reason) == ("failed", "status 413 PayloadTooLarge")


async def test_a_development_build_goes_to_the_sandbox_with_its_own_topic(tls, clock) -> None:
    p8, pub = apns_keys()
    production = await FakeApns(pub, KEY_ID, TEAM, TOPIC, tls.server, clock=clock).start()
    sandbox = await FakeApns(pub, KEY_ID, TEAM, "com.example.qim.dev", tls.server, clock=clock).start()
    provider = ApnsProvider(ApnsConfig(TEAM, KEY_ID, p8, TOPIC, base_url=production.base_url,
                                       sandbox_url=sandbox.base_url, ca_file=tls.ca_file, timeout_s=1.5), clock=clock)
    await provider.start()
    try:
        dev = Registration("apns", token=DEVICE, apns_topic="com.example.qim.dev", apns_sandbox=True)
        assert (await provider.send(Notification(dev, _note().alert))).kind == "sent"
        assert (await provider.send(_note())).kind == "sent"
        assert [r.headers["apns-topic"] for r in sandbox.received] == ["com.example.qim.dev"]
        assert [r.headers["apns-topic"] for r in production.received] == [TOPIC]
        assert sandbox.rejected == production.rejected == []
    finally:
        await provider.close()
        await production.stop()
        await sandbox.stop()
