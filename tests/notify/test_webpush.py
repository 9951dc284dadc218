"""WebPushProvider against the local RFC 8030 push service (tests/notify/fakes/webpush.py),
which checks VAPID (RFC 8292) and DECRYPTS the aes128gcm payload (RFC 8291) with the
subscription's private key that the test made: what the service worker would read, the
TTL, Topic and Urgency headers, a silent badge update, every answer mapped onto its
Outcome, a hang, a dropped and a refused connection, a subscription without keys."""

from __future__ import annotations

import time

import pytest

from qim.notify.providers.base import Alert, Notification, Registration
from qim.notify.providers.webpush import topic
from tests.notify.pushfixtures import SUBJECT

CONV = "0d" * 16


def _note(subscription, silent: bool = False, with_content: bool = True) -> Notification:
    alert = Alert(badge=7, badge_version=2, collapse_id=CONV, title="Cy", body="yo", silent=silent, ttl_s=120)
    return Notification(Registration("webpush", subscription=subscription, with_content=with_content), alert)


async def test_an_alert_arrives_encrypted_with_vapid_and_headers(webpush) -> None:
    provider, fake, sub = webpush
    assert (await provider.send(_note(sub))).kind == "sent"
    assert fake.rejected == []
    (got,) = fake.received
    assert (got["ttl"], got["topic"], got["urgency"], got["sub_claim"]) == ("120", CONV, "high", SUBJECT)
    assert got["payload"] == {"badge": "7", "badge_version": "2", "conversation": CONV, "silent": "0",
                              "title": "Cy", "body": "yo"}
    assert provider.metrics.value("qim_push_sends_total", {"provider": "webpush", "outcome": "sent"}) == 1


async def test_content_free_and_silent_messages(webpush) -> None:
    provider, fake, sub = webpush
    assert (await provider.send(_note(sub, with_content=False))).kind == "sent"
    assert (await provider.send(_note(sub, silent=True))).kind == "sent"
    generic, silent = (r["payload"] for r in fake.received)
    assert (generic["title"], generic["body"]) == ("", "New message")
    assert silent["silent"] == "1" and "body" not in silent and fake.received[1]["urgency"] == "normal"


def test_a_long_collapse_id_is_hashed_into_a_topic() -> None:
    long = topic("x" * 80 + "/")
    assert len(long) == 32 and long != topic("y" * 80) and topic(CONV) == CONV


@pytest.mark.parametrize("mode, kind, reason, retry_after", [
    ("410", "permanent", "status 410", None),
    ("400", "failed", "status 400", None),
    ("429", "retry_after", "status 429", 7.0),
    ("500", "retry_after", "status 500", None),
])
async def test_answers_map_onto_outcomes(webpush, mode, kind, reason, retry_after) -> None:
    provider, fake, sub = webpush
    fake.mode = mode
    outcome = await provider.send(_note(sub))
    assert (outcome.kind, outcome.reason, outcome.retry_after_s) == (kind, reason, retry_after)


async def test_an_unknown_subscription_is_permanent(webpush) -> None:
    provider, fake, sub = webpush
    gone = {**sub, "endpoint": sub["endpoint"].rsplit("/", 1)[0] + "/unknown"}
    assert (await provider.send(_note(gone))).kind == "permanent"
    assert (await provider.send(_note({"endpoint": sub["endpoint"]}))).reason == "bad subscription keys"


async def test_a_hang_a_dropped_and_a_refused_connection(webpush) -> None:
    provider, fake, sub = webpush
    fake.mode = "hang"
    began = time.monotonic()
    outcome = await provider.send(_note(sub))
    assert (outcome.kind, outcome.retry_reason) == ("retry_after", "timeout")
    assert time.monotonic() - began < 30  # bounded by timeout_s (1.5 s), not by the fake's minute
    fake.mode = "close"
    outcome = await provider.send(_note(sub))
    assert (outcome.kind, outcome.retry_reason) == ("retry_after", "unreachable")
    await fake.stop()
    outcome = await provider.send(_note(sub))
    assert (outcome.kind, outcome.retry_reason) == ("retry_after", "unreachable")


async def test_a_redirect_is_not_followed_and_plain_http_is_refused(webpush) -> None:
    provider, fake, sub = webpush
    fake.mode = "307"  # the endpoint is the client's text: QIM posts nowhere else
    outcome = await provider.send(_note(sub))
    assert (outcome.kind, outcome.reason) == ("failed", "status 307") and fake.followed == 0
    plain = {**sub, "endpoint": sub["endpoint"].replace("https://", "http://")}
    outcome = await provider.send(_note(plain))
    assert (outcome.kind, outcome.reason) == ("permanent", "no https subscription endpoint")
    assert len(fake.received) == 1
