"""FcmProvider against the local FCM v1 endpoint and its OAuth2 token endpoint
(tests/notify/fakes/fcm.py): the assertion and the bearer token as Google checks them, the
message shape of an alert and of a data-only badge update, every answer mapped onto its
Outcome, a hang and a dropped connection, and the access token replaced before it
expires (a hand-moved clock)."""

from __future__ import annotations

import time

import pytest

from qim.notify.providers.base import Alert, Notification, Registration

DEVICE = "fcm-registration-token-1"
CONV = "0e" * 16


def _note(silent: bool = False) -> Notification:
    alert = Alert(badge=3, badge_version=4, collapse_id=CONV, title="Bo", body="hi", silent=silent, ttl_s=300)
    return Notification(Registration("fcm", token=DEVICE), alert)


async def test_an_alert_arrives_with_collapse_key_notification_and_badge(fcm) -> None:
    provider, fake = fcm
    assert (await provider.send(_note())).kind == "sent"
    assert fake.rejected == [] and fake.exchanges == 1
    (msg,) = fake.received
    assert msg["token"] == DEVICE
    assert msg["android"] == {"collapse_key": CONV, "priority": "high", "ttl": "300s"}
    assert msg["notification"] == {"title": "Bo", "body": "hi"}
    assert msg["data"] == {"badge": "3", "badge_version": "4", "conversation": CONV, "silent": "0"}


async def test_a_silent_badge_update_is_data_only(fcm) -> None:
    provider, fake = fcm
    assert (await provider.send(_note(silent=True))).kind == "sent"
    (msg,) = fake.received
    assert "notification" not in msg and msg["data"]["silent"] == "1" and msg["data"]["badge"] == "3"
    assert msg["android"]["priority"] == "normal"


@pytest.mark.parametrize("mode, kind, reason, retry_after", [
    ("410", "permanent", "NOT_FOUND", None),  # 404 UNREGISTERED
    ("400", "permanent", "INVALID_ARGUMENT", None),  # the token is not a valid registration token
    ("400payload", "failed", "status 400 INVALID_ARGUMENT", None),  # the message, not the token
    ("429", "retry_after", "status 429", 7.0),
    ("500", "retry_after", "status 500", None),
])
async def test_answers_map_onto_outcomes(fcm, mode, kind, reason, retry_after) -> None:
    provider, fake = fcm
    fake.mode = mode
    outcome = await provider.send(_note())
    assert (outcome.kind, outcome.reason, outcome.retry_after_s) == (kind, reason, retry_after)
    assert provider.metrics.value("qim_push_sends_total", {"provider": "fcm", "outcome": kind}) == 1


async def test_a_hang_a_dropped_and_a_refused_connection(fcm) -> None:
    provider, fake = fcm
    assert (await provider.send(_note())).kind == "sent"  # the access token is cached from here
    fake.mode = "hang"
    began = time.monotonic()
    outcome = await provider.send(_note())
    assert (outcome.kind, outcome.retry_reason) == ("retry_after", "timeout")
    assert time.monotonic() - began < 30  # bounded by timeout_s (1.5 s), not by the fake's minute
    fake.mode = "close"
    outcome = await provider.send(_note())
    assert (outcome.kind, outcome.retry_reason) == ("retry_after", "unreachable")
    await fake.stop()
    outcome = await provider.send(_note())
    assert (outcome.kind, outcome.retry_reason) == ("retry_after", "unreachable")


async def test_the_access_token_is_replaced_before_it_expires(fcm, clock) -> None:
    provider, fake = fcm
    assert (await provider.send(_note())).kind == "sent"
    clock.advance(3299)  # 301 s left: more than the 300 s margin
    assert (await provider.send(_note())).kind == "sent"
    assert fake.exchanges == 1 and fake.received[0]["_bearer"] == fake.received[1]["_bearer"]
    clock.advance(1)  # within the margin: exchanged again before the endpoint would refuse it
    assert (await provider.send(_note())).kind == "sent"
    assert fake.exchanges == 2 and fake.received[2]["_bearer"] != fake.received[1]["_bearer"]
    assert fake.rejected == []
    assert provider.metrics.value("qim_push_credential_refreshes_total", {"provider": "fcm"}) == 2


async def test_a_refused_access_token_is_dropped_and_retried(fcm) -> None:
    provider, fake = fcm
    assert (await provider.send(_note())).kind == "sent"
    fake.issued.clear()  # the endpoint forgot it (revoked): 401
    outcome = await provider.send(_note())
    assert (outcome.kind, outcome.retry_reason) == ("retry_after", "credential")
    assert (await provider.send(_note())).kind == "sent" and fake.exchanges == 2


async def test_a_token_endpoint_that_refuses_the_assertion_is_a_credential_retry(fcm) -> None:
    provider, fake = fcm
    fake.client_email = "someone-else@qim-test.iam.gserviceaccount.com"  # the key no longer matches the account
    outcome = await provider.send(_note())
    assert (outcome.kind, outcome.retry_reason, outcome.reason) == ("retry_after", "credential",
                                                                    "token endpoint status 400")
    assert fake.received == [] and fake.rejected and fake.rejected[0].startswith("assertion")
    assert provider.metrics.value("qim_push_retries_total", {"provider": "fcm", "reason": "credential"}) == 1
