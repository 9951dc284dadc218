"""The caller's retry rule and the Retry-After reading of qim/notify/providers/base.py
(docs/decisions/0130): bounded, jittered, doubling, never sooner than the provider asked."""

from __future__ import annotations

import email.utils

import pytest

from qim.notify.providers.base import Outcome, RetryPolicy, by_status, parse_retry_after


def test_retry_after_as_seconds_or_an_http_date() -> None:
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after(email.utils.formatdate(1_000_090, usegmt=True), now=lambda: 1_000_000.0) == 90.0
    assert parse_retry_after(email.utils.formatdate(999_000, usegmt=True), now=lambda: 1_000_000.0) == 0.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_statuses_every_provider_reads_alike() -> None:
    assert by_status(201, None) == Outcome.sent()
    assert by_status(429, "3") == Outcome.retry("rate_limited", "status 429", 3.0)
    assert by_status(503, None) == Outcome.retry("server_error", "status 503", None)
    assert by_status(410, None) is None  # the provider's own rule


@pytest.mark.parametrize("rand", [0.0, 0.5, 1.0])
def test_the_delay_doubles_with_jitter_up_to_a_cap_and_gives_up(rand) -> None:
    policy = RetryPolicy(start=1.0, cap=8.0, attempts=6, rand=lambda: rand)
    busy = Outcome.retry("server_error", "status 500")
    delays = [policy.delay(busy, n) for n in range(1, 6)]
    assert delays == [b / 2 + rand * b / 2 for b in (1.0, 2.0, 4.0, 8.0, 8.0)]
    assert policy.delay(busy, 6) is None  # bounded: the caller records it as failed
    assert policy.delay(Outcome.permanent("Unregistered"), 1) is None


def test_the_providers_retry_after_is_honoured_and_capped() -> None:
    policy = RetryPolicy(start=1.0, cap=8.0, max_retry_after_s=600.0, rand=lambda: 1.0)
    assert policy.delay(Outcome.retry("rate_limited", "status 429", 30.0), 1) == 30.0
    assert policy.delay(Outcome.retry("rate_limited", "status 429", 86400.0), 1) == 600.0
