"""Send-rate limits, the connection cap and key rotation through a real stack (issue 15;
docs/operations.md "Rate limits", "Tokens and keys"; docs/decisions/0021).

One private stack for the module, its gateway configured small: 2 mutating requests
per second per user (burst 2), at most 2 connections per user, and two trusted public
keys (the development key and a second one: a rotation in progress).
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from qim._core import ids
from qim.consts import CONNECTION_CAP_RETRY_AFTER_MS
from qim.dev.devkeys import dev_token_key
from qim.errors import ErrorCode
from qim.proto.v1 import common_pb2, connection_pb2, message_pb2
from qim.protocol import Opcode
from qim.sdk import Client, ServerError
from qim.wire.devtoken import issue_dev_token
from qim.wire.tokens import SigningKey
from tests.e2e.test_tokens_auth import gateway_stream, metric, transport, try_auth
from tests.fixtures import running_stack
from tests.sdk.realstack import eventually, users
from tests.sdk.test_rate_gate import early_transmissions, record_wire

RATE = 2  # QIM_RATE_USER_PER_S = QIM_RATE_USER_BURST
NEXT_KEY = SigningKey.generate("ES256")  # the key being rotated in


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    base = tmp_path_factory.mktemp("limited")
    _, dev_public = dev_token_key(base / "stack")  # the stack keeps this key; a second one is listed beside it
    next_public = base / "next_pub.pem"
    next_public.write_bytes(NEXT_KEY.verify_key().public_pem())
    env = {"QIM_RATE_USER_PER_S": str(RATE), "QIM_RATE_USER_BURST": str(RATE), "QIM_MAX_CONNECTIONS_PER_USER": "2",
           "QIM_TOKEN_PUBLIC_KEYS": f"{dev_public},{next_public}"}
    with running_stack(base, extra_env=env) as st:
        yield st


async def authed(stack, token: str):
    s = await gateway_stream(stack)
    s.send(Opcode.AUTH, 1, connection_pb2.Auth(token=token).SerializeToString())
    op, _, body = await asyncio.wait_for(s.read_frame(), 10)
    assert op == Opcode.AUTH_OK, body
    return s


async def past_wakeups(stream):
    """The next frame that is not a PUSH_EVENTS wake-up (a login's own wake-up may come first)."""
    while True:
        item = await stream.read_frame()
        if item is None or item[0] != Opcode.PUSH_EVENTS:
            return item


def send_frame(me: int, peer: int, body: bytes) -> bytes:
    return message_pb2.SendMessage(client_message_id=os.urandom(16), conversation_id=ids.conversation_id_direct(
        0, me, peer), recipient_user_id=peer, body=body).SerializeToString()


async def test_a_sender_above_the_user_rate_gets_rate_limited_with_retry_after(limited):
    me, peer = users(2)
    s = await authed(limited, issue_dev_token(limited.token_key, 0, me, 1))
    try:
        for rid in range(10, 10 + RATE + 2):
            s.send(Opcode.SEND_MESSAGE, rid, send_frame(me, peer, b"burst"))
        replies = {}
        while len(replies) < RATE + 2:
            op, rid, body = await asyncio.wait_for(s.read_frame(), 15)
            if rid:
                replies[rid] = (op, body)
        ops = [replies[r][0] for r in sorted(replies)]
        assert ops.count(Opcode.SEND_ACK) == RATE and ops.count(Opcode.ERROR) == 2, ops
        for op, body in replies.values():
            if op == Opcode.ERROR:
                err = common_pb2.Error.FromString(body)
                assert ErrorCode(err.code) == ErrorCode.RATE_LIMITED, err
                assert 0 < err.retry_after_ms <= 1000 // RATE, err
    finally:
        s.abort()


async def test_the_sdk_waits_for_the_hint_and_delivers_everything(limited, tmp_path, monkeypatch):
    """8 sends and a MARK_READ at once from one user limited to 2 requests per second:
    one RateGate for sends, their UNAVAILABLE retries and MARK_READ (qim/sdk/rategate.py)
    paces them below the limit the gateway advertises in AUTH_OK, so the limit acts
    (they take as long as the bucket says) and refuses nothing (before the gate covered
    all of them, CI counted 31 refusals for 8 sends; before the advertised limit, about
    one per request). The refusal-driven rules of a gateway that advertises nothing are
    tests/sdk/test_rate_gate.py's."""
    a, b, c = users(3)
    opened = []
    for user, name in ((a, "a"), (b, "b"), (c, "c")):
        opened.append(await Client.open(limited.gateway_addr, issue_dev_token(limited.token_key, 0, user, 1),
                                        data_dir=str(tmp_path / name), **transport(limited)))
    sender, reader, third = opened
    try:
        for client in opened:
            await client.connect()
        chat = await sender.open_direct(b)
        other = await third.open_direct(a)
        await third.send_text(other.conversation_id, "unread")  # for the sender's MARK_READ below
        await eventually(lambda: sender.store.messages(other.conversation_id), what="the message to mark read")
        await asyncio.sleep(1.0)  # the sender's bucket full again: the burst below starts from `burst` tokens
        refused_before = metric(limited, "qim_gateway_rate_limited_total", 'scope="user"')
        gate_before = sender.runtime.rate_gate.refusals
        sent, refusals = record_wire(monkeypatch)  # from here on only the sender transmits counted requests
        n = 8
        started = time.monotonic()
        acks, read = await asyncio.gather(
            asyncio.gather(*(sender.send_text(chat.conversation_id, f"m{i}") for i in range(n))),
            sender.mark_read(other.conversation_id))
        elapsed = time.monotonic() - started
        assert read == 1
        assert sorted(a.conversation_seq for a in acks) == sorted({a.conversation_seq for a in acks})  # n distinct
        requests = n + 1  # the sends and the MARK_READ: each takes a token of the user's bucket
        assert elapsed >= (requests - RATE) / RATE - 0.5, elapsed  # 2 tokens in the bucket, then 2 per second
        refused = metric(limited, "qim_gateway_rate_limited_total", 'scope="user"') - refused_before
        assert refused == 0, f"{refused} refusals for {requests} requests: the SDK did not pace below the limit"
        assert early_transmissions(sent, refusals) == [], "a request left before the hint it had received"
        assert sender.runtime.rate_gate.refusals - gate_before == refused == len(refusals)  # it heard every one
        await eventually(lambda: len(reader.store.messages(chat.conversation_id)) == n, timeout=30,
                         what="every message delivered")
        assert sorted(m.body.decode() for m in reader.store.messages(chat.conversation_id)) == \
            sorted(f"m{i}" for i in range(n))
    finally:
        for client in opened:
            await client.close()


async def test_the_connection_cap_refuses_a_third_device_and_closes(limited, tmp_path):
    (me,) = users(1)
    first = await authed(limited, issue_dev_token(limited.token_key, 0, me, 1))
    second = await authed(limited, issue_dev_token(limited.token_key, 0, me, 2))
    try:
        op, err, closed = await try_auth(limited, issue_dev_token(limited.token_key, 0, me, 3))
        assert op == Opcode.ERROR and ErrorCode(err.code) == ErrorCode.RATE_LIMITED and closed
        assert err.retry_after_ms == CONNECTION_CAP_RETRY_AFTER_MS
        # the SDK's connect() tells the app at once: the hint is past its retry budget
        third = await Client.open(limited.gateway_addr, issue_dev_token(limited.token_key, 0, me, 3),
                                  data_dir=str(tmp_path), **transport(limited))
        started = time.monotonic()
        with pytest.raises(ServerError) as info:
            await third.connect()
        await third.close()
        assert info.value.code == ErrorCode.RATE_LIMITED and time.monotonic() - started < 10
        again = await authed(limited, issue_dev_token(limited.token_key, 0, me, 2))  # the same device: replaces
        op, rid, _ = await asyncio.wait_for(past_wakeups(second), 10)
        assert (op, rid) == (Opcode.KICKED, 0)
        again.abort()
    finally:
        first.abort()
        second.abort()


async def test_two_keys_are_valid_during_a_rotation_and_a_third_is_not(limited):
    a, b, c = users(3)
    old = await authed(limited, issue_dev_token(limited.token_key, 0, a, 1))  # the development key
    new = await authed(limited, issue_dev_token(NEXT_KEY, 0, b, 1))  # the key being rotated in (ES256)
    old.abort()
    new.abort()
    before = metric(limited, "qim_gateway_auth_refused_total", 'reason="unknown_kid"')
    op, err, closed = await try_auth(limited, issue_dev_token(SigningKey.generate(), 0, c, 1))
    assert op == Opcode.ERROR and ErrorCode(err.code) == ErrorCode.UNAUTHENTICATED and closed
    assert metric(limited, "qim_gateway_auth_refused_total", 'reason="unknown_kid"') - before == 1
