"""The moderation webhook policy (qim/policy/webhook.py; docs/decisions/0114) against a
real HTTPS webhook on loopback (tests/policy/hookserver.py): accept, refuse with the
receiver's reason, a masking answer as a Replace (decision 0126), and every kind of "no answer"
(500, garbage, a broken connection, a hang past the timeout, a refused connection, a
full concurrency cap, an open breaker) decided by the fail policy per kind (closed holds
the send: decision 0133); the request
is signed and TLS is verified; nothing of a body reaches a log line."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
from dataclasses import replace

import pytest

from qim.config.env import Env
from qim.config.moderation import WebhookConfig, parse_fail_policy
from qim.errors import ConfigError
from qim.policy import ACCEPT, Hold, Refuse, Replace, SendFacts
from qim.policy.webhook import FAIL_CLOSED_REASON, FAIL_CLOSED_RETRY_MS, WebhookPolicy
from tests.policy.hookserver import REFUSAL, SECRET, HookServer


@pytest.fixture(scope="module")
def hook(tmp_path_factory):
    """One webhook server for the module."""
    server = HookServer(tmp_path_factory.mktemp("hookpki")).start()
    yield server
    server.stop()


@pytest.fixture
def config(hook) -> WebhookConfig:
    """Closed for direct and group, open for rooms; 900 ms to answer (a busy machine)."""
    hook.mode = None
    return WebhookConfig(url=hook.url, secret=SECRET, ca_file=hook.ca_file, timeout_ms=900,
                         fail=parse_fail_policy("closed,room=open"), concurrency=8, breaker_failures=50)


# no answer under fail closed: held, retried by the client (decision 0133), never refused
HELD = Hold(FAIL_CLOSED_RETRY_MS, FAIL_CLOSED_REASON)


def facts(text: str, kind: str = "direct") -> SendFacts:
    """A send of `text` by user 7, device 1, fresh client_message_id."""
    return SendFacts(kind=kind, tenant=0, user_id=7, device_id=1, conversation_id=b"\x01" * 16, message_type=1,
                     custom_type=b"", body=text.encode(), client_message_id=os.urandom(16))


async def verdicts(config: WebhookConfig, *sends: SendFacts) -> list:
    """Each send's verdict from one policy (closed afterwards)."""
    policy = WebhookPolicy(config)
    try:
        return [await policy(f) for f in sends]
    finally:
        await policy.close()


async def test_accept_refuse_and_mask_answers(hook, config):
    sends = [facts("hello"), facts("please refuse this"), facts("mask my words"), facts("refuse", "room")]
    got = await verdicts(config, *sends)
    assert got == [ACCEPT, Refuse(REFUSAL), Replace(b"**** my words"), Refuse(REFUSAL)]
    assert [hook.calls_for(f.client_message_id) for f in sends] == [1, 1, 1, 1]
    assert hook.bad_signatures == 0
    asked = next(r for r in hook.requests if r["client_message_id"] == sends[0].client_message_id.hex())
    assert (asked["kind"], asked["sender"], asked["text"], asked["body"]) == ("direct", {"user_id": 7, "device_id": 1},
                                                                            "hello", "aGVsbG8=")


async def test_the_request_names_mentions_reply_target_and_edited_message(hook, config):
    target, edited = os.urandom(16), os.urandom(16)
    send = replace(facts("hello @8"), reply_to_message_id=target, mention_user_ids=(8, 2**63), mention_all=True)
    edit = replace(facts("fixed"), edit_of=edited)
    assert await verdicts(config, send, edit, facts("plain")) == [ACCEPT, ACCEPT, ACCEPT]
    asked = {r["client_message_id"]: r for r in hook.requests}
    got = asked[send.client_message_id.hex()]
    assert (got["reply_to_message_id"], got["mentions"], got["edit_of"]) == (
        target.hex(), {"user_ids": ["8", str(2**63)], "all": True}, None)
    assert asked[edit.client_message_id.hex()]["edit_of"] == edited.hex()
    plain = next(r for r in hook.requests if r["text"] == "plain")
    assert (plain["reply_to_message_id"], plain["mentions"], plain["edit_of"]) == (
        None, {"user_ids": [], "all": False}, None)


@pytest.mark.parametrize("answer, verdict", [({"text": "h*llo"}, Replace(b"h*llo")),
                                             ({"body": "aGk="}, Replace(b"hi")),
                                             ({"body": "not base64!"}, HELD),
                                             ({"text": 5}, HELD)])
def test_a_replaced_body_is_base64_body_or_text_else_garbage(answer, verdict):
    # _answer is the parser of the real server's bytes above; the fail policy (closed for
    # direct) decides a replacement that does not decode, as any garbage
    outcome, got = WebhookPolicy._answer(200, json.dumps(answer).encode())
    assert (got or HELD) == verdict, outcome


@pytest.mark.parametrize("text", ["boom", "garbage", "broken", "hang"])
async def test_no_answer_follows_the_fail_policy_per_kind(hook, config, text):
    direct, group, room = facts(text), facts(text, "group"), facts(text, "room")
    got = await verdicts(config, direct, group, room)
    assert got == [HELD, HELD, ACCEPT]
    opened = await verdicts(replace(config, fail=parse_fail_policy("open")), facts(text), facts(text, "group"))
    assert opened == [ACCEPT, ACCEPT]


async def test_a_refused_connection_and_an_unverified_certificate_are_no_answer(hook, config):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = replace(config, url=f"https://127.0.0.1:{port}/verdict")
    assert await verdicts(down, facts("hello"), facts("hello", "room")) == [HELD, ACCEPT]
    before = len(hook.requests)
    untrusted = replace(config, ca_file="")  # the system's CAs do not know the development CA
    assert await verdicts(untrusted, facts("hello")) == [HELD]
    assert len(hook.requests) == before  # TLS refused before any request was read


async def test_a_wrong_secret_is_refused_by_the_receiver(hook, config):
    assert await verdicts(replace(config, secret="another-secret-entirely"), facts("hello")) == [HELD]
    assert hook.bad_signatures >= 1
    hook.bad_signatures = 0


async def test_the_breaker_opens_and_a_trial_closes_it(hook, config):
    policy = WebhookPolicy(replace(config, breaker_failures=3, breaker_open_ms=400))
    try:
        hook.mode = "boom"
        for _ in range(3):
            assert await policy(facts("x")) == HELD
        assert policy.metrics.value("qim_moderation_breaker_open") == 1
        calls = sum(hook.calls.values())
        hook.mode = None
        skipped = facts("hello")
        assert await policy(skipped) == HELD  # open: not asked at all
        assert sum(hook.calls.values()) == calls
        assert policy.metrics.value("qim_moderation_verdicts_total", {"kind": "direct", "outcome": "breaker"}) == 1
        for _ in range(200):  # past the open period a trial goes out and closes it
            verdict = await policy(facts("hello"))
            if verdict == ACCEPT:
                break
            await asyncio.sleep(0.05)
        assert verdict == ACCEPT and policy.metrics.value("qim_moderation_breaker_open") == 0
    finally:
        hook.mode = None
        await policy.close()


async def test_a_full_concurrency_cap_waits_then_is_no_answer(hook, config):
    policy = WebhookPolicy(replace(config, concurrency=1, timeout_ms=200))
    try:
        async with policy.slots:  # the one slot taken (as by a request in flight)
            got = [await policy(facts("hello")), await policy(facts("hello", "room"))]
        assert got == [HELD, ACCEPT]  # no answer: closed for direct, open for rooms
        assert policy.metrics.value("qim_moderation_waited_total") == 2
        assert policy.metrics.value("qim_moderation_verdicts_total", {"kind": "direct", "outcome": "busy"}) == 1
        assert await policy(facts("hello")) == ACCEPT  # the slot is free again
    finally:
        await policy.close()


async def test_no_body_in_the_logs(hook, config, caplog):
    caplog.set_level(logging.DEBUG, logger="qim.policy.webhook")
    secret_words = "boom the launch code is 1234"
    await verdicts(config, facts(secret_words), facts("garbage launch code"))
    assert caplog.records and not any("launch code" in r.getMessage() for r in caplog.records)


def test_configuration_is_validated_by_name():
    assert parse_fail_policy("direct=open,group=closed,room=open") == {"direct": "open", "group": "closed",
                                                                      "room": "open"}
    assert parse_fail_policy("") == {"direct": "closed", "group": "closed", "room": "closed"}
    for bad, name in (({"QIM_WEBHOOK_FAIL_POLICY": "ajar"}, "QIM_WEBHOOK_FAIL_POLICY"),
                      ({"QIM_WEBHOOK_FAIL_POLICY": "dm=open"}, "QIM_WEBHOOK_FAIL_POLICY"),
                      ({"QIM_MODERATION_WEBHOOK_URL": "https://h/v"}, "QIM_MODERATION_WEBHOOK_SECRET"),
                      ({"QIM_MODERATION_WEBHOOK_URL": "ftp://h/v", "QIM_MODERATION_WEBHOOK_SECRET": SECRET},
                       "QIM_MODERATION_WEBHOOK_URL"),
                      ({"QIM_MODERATION_SYNC_TIMEOUT_MS": "1000"}, "QIM_MODERATION_SYNC_TIMEOUT_MS")):
        with pytest.raises(ConfigError, match=name):
            WebhookConfig.from_env(Env(bad))
    with pytest.raises(ConfigError, match="QIM_MODERATION_WEBHOOK_URL"):
        WebhookPolicy(WebhookConfig())
