"""Send-rate limits of the gateway (qim/services/gateway/ratelimit.py): token
buckets per connection and per user, charged only by mutating requests, a refusal that
carries retry_after_ms and charges nothing, and the sweep of refilled user buckets.
Bucket logic on an injected clock; one test over a real loopback connection."""

from __future__ import annotations

import asyncio
import os

import pytest

from qim._core import ids
from qim.errors import ErrorCode
from qim.net.framed import open_framed, parse_addr
from qim.proto.v1 import common_pb2, connection_pb2, message_pb2, session_pb2
from qim.protocol import Opcode
from qim.services.gateway.metrics import GatewayMetrics
from qim.services.gateway.ratelimit import SWEEP_S, RateLimited, SendLimiter, TokenBucket
from tests.gateway.standin import gateway, serve, token


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_bucket_holds_its_burst_and_refills_at_its_rate():
    b = TokenBucket(2, 3, now=0.0)
    for _ in range(3):
        assert b.wait_s(0.0) == 0.0
        b.take(0.0)
    assert b.wait_s(0.0) == pytest.approx(0.5)  # one token per 0.5 s
    assert b.wait_s(0.25) == pytest.approx(0.25)
    assert b.wait_s(0.5) == 0.0 and not b.full(0.5)
    assert b.full(10.0) and b.tokens == 3  # never above the burst
    with pytest.raises(ValueError):
        TokenBucket(0, 1, 0.0)


def test_the_user_bucket_spans_connections_and_a_refusal_charges_nothing():
    clock, metrics = Clock(), GatewayMetrics()
    lim = SendLimiter(user_per_s=1, user_burst=2, conn_per_s=10, conn_burst=10, metrics=metrics, clock=clock)
    c1, c2 = lim.conn_bucket(), lim.conn_bucket()
    lim.admit((0, 5), c1)
    lim.admit((0, 5), c2)  # the user's second token, from another connection
    with pytest.raises(RateLimited) as info:
        lim.admit((0, 5), c1)
    assert info.value.code == ErrorCode.RATE_LIMITED and info.value.retry_after_ms == 1000
    assert c1.tokens == 9 and c2.tokens == 9  # the refused request took nothing
    lim.admit((0, 6), c1)  # another user has its own bucket
    clock.t += 1.0
    lim.admit((0, 5), c2)
    assert metrics.value("qim_gateway_rate_limited_total", {"scope": "user"}) == 1


def test_the_connection_bucket_limits_one_connection_only():
    clock = Clock()
    lim = SendLimiter(user_per_s=100, user_burst=100, conn_per_s=4, conn_burst=1, clock=clock)
    fast, other = lim.conn_bucket(), lim.conn_bucket()
    lim.admit((0, 5), fast)
    with pytest.raises(RateLimited) as info:
        lim.admit((0, 5), fast)
    assert info.value.retry_after_ms == 250
    lim.admit((0, 5), other)
    assert SendLimiter(0, 1, 0, 1).conn_bucket() is None  # 0 per second: not limited


def test_refilled_user_buckets_are_swept():
    clock = Clock()
    lim = SendLimiter(user_per_s=1, user_burst=5, conn_per_s=0, conn_burst=1, clock=clock)
    for user in range(1, 101):
        lim.admit((0, user), None)
    assert lim.tracked_users == 100
    clock.t += SWEEP_S
    lim.admit((0, 1), None)  # the sweep runs on the next request after SWEEP_S
    assert lim.tracked_users == 1  # only the user that just sent


class AckRouter:
    """Answers every writer/session call at once."""

    async def call(self, backend, key, opcode, body):
        return await getattr(self, f"call_{backend}")(key, opcode, body)

    async def call_writer(self, key, opcode, body):
        return Opcode.SEND_ACK, message_pb2.SendAck(conversation_seq=1).SerializeToString()

    async def call_session(self, key, opcode, body):
        return Opcode.MARK_READ_OK, session_pb2.MarkReadOk().SerializeToString()


async def test_a_sender_above_its_rate_gets_rate_limited_with_a_retry_after():
    gw = gateway(AckRouter(), rate_conn_per_s=2, rate_conn_burst=2, rate_user_per_s=1000, rate_user_burst=1000)
    server, addr = await serve(gw)
    s = await open_framed(*parse_addr(addr))
    try:
        s.send(Opcode.AUTH, 1, connection_pb2.Auth(token=token(5)).SerializeToString())
        assert (await asyncio.wait_for(s.read_frame(), 5))[0] == Opcode.AUTH_OK
        conv = ids.conversation_id_direct(0, 5, 6)
        for rid in range(10, 14):
            s.send(Opcode.SEND_MESSAGE, rid, message_pb2.SendMessage(
                client_message_id=os.urandom(16), conversation_id=conv, recipient_user_id=6,
                body=b"x").SerializeToString())
        s.send(Opcode.PING, 20, b"")  # reads are not limited
        replies = {}
        while len(replies) < 5:
            op, rid, body = await asyncio.wait_for(s.read_frame(), 5)
            replies[rid] = (op, body)
        assert [replies[r][0] for r in range(10, 14)] == [Opcode.SEND_ACK] * 2 + [Opcode.ERROR] * 2
        assert replies[20][0] == Opcode.PONG
        for rid in (12, 13):
            err = common_pb2.Error.FromString(replies[rid][1])
            assert ErrorCode(err.code) == ErrorCode.RATE_LIMITED and err.request_opcode == Opcode.SEND_MESSAGE
            assert 0 < err.retry_after_ms <= 500
        await asyncio.sleep(0.6)  # one token back after the hint: the retry is accepted
        s.send(Opcode.SEND_MESSAGE, 30, message_pb2.SendMessage(
            client_message_id=os.urandom(16), conversation_id=conv, recipient_user_id=6,
            body=b"x").SerializeToString())
        assert (await asyncio.wait_for(s.read_frame(), 5))[:2] == (Opcode.SEND_ACK, 30)
        assert gw.metrics.value("qim_gateway_rate_limited_total", {"scope": "connection"}) == 2
    finally:
        s.abort()
        server.close()


def test_the_tightest_bucket_is_advertised_and_a_refund_gives_the_token_back():
    clock = Clock()
    assert SendLimiter(400, 800, 200, 400).advertised() == (200, 400)
    assert SendLimiter(100, 50, 0, 1).advertised() == (100, 50)  # connections not limited: the user's
    assert SendLimiter(0, 1, 0, 1).advertised() == (0, 0)
    lim = SendLimiter(user_per_s=1, user_burst=1, conn_per_s=1, conn_burst=1, clock=clock)
    conn = lim.conn_bucket()
    lim.admit((0, 5), conn)
    lim.refund((0, 5), conn)  # the backend said "not now": the retry is the one charged
    lim.admit((0, 5), conn)
    with pytest.raises(RateLimited):
        lim.admit((0, 5), conn)
    lim.refund((0, 5), conn)
    lim.refund((0, 5), conn)  # never above the burst
    assert conn.tokens == 1


class NotYetRouter:
    """The writer answers the first transmission of each send "previous send not yet sequenced"."""

    def __init__(self) -> None:
        self.seen: set[bytes] = set()

    async def call(self, backend, key, opcode, body):
        assert backend == "writer"
        if body not in self.seen:  # the writer's envelope of the send: the same for its retry
            self.seen.add(body)
            return Opcode.ERROR, common_pb2.Error(code=ErrorCode.UNAVAILABLE, message="previous send not yet sequenced",
                                                  request_opcode=0x7F01).SerializeToString()
        return Opcode.SEND_ACK, message_pb2.SendAck(conversation_seq=1).SerializeToString()


async def test_auth_ok_advertises_the_limit_and_a_not_now_answer_is_not_charged():
    gw = gateway(NotYetRouter(), rate_conn_per_s=1, rate_conn_burst=2, rate_user_per_s=1000, rate_user_burst=1000)
    server, addr = await serve(gw)
    s = await open_framed(*parse_addr(addr))
    try:
        s.send(Opcode.AUTH, 1, connection_pb2.Auth(token=token(5)).SerializeToString())
        op, _, body = await asyncio.wait_for(s.read_frame(), 5)
        ok = connection_pb2.AuthOk.FromString(body)
        assert op == Opcode.AUTH_OK and (ok.send_rate_per_s, ok.send_burst) == (1, 2)
        conv = ids.conversation_id_direct(0, 5, 6)
        sends = [message_pb2.SendMessage(client_message_id=os.urandom(16), conversation_id=conv, recipient_user_id=6,
                                         body=b"x").SerializeToString() for _ in range(2)]
        answers = []
        for rid, body in enumerate(sends + sends, start=10):  # each refused "not now", then retried
            s.send(Opcode.SEND_MESSAGE, rid, body)
            op, got, reply = await asyncio.wait_for(s.read_frame(), 5)
            answers.append(op if op != Opcode.ERROR else ErrorCode(common_pb2.Error.FromString(reply).code))
        # burst 2: four transmissions fit because the two refused ones were given back
        assert answers == [ErrorCode.UNAVAILABLE] * 2 + [Opcode.SEND_ACK] * 2
        assert gw.metrics.value("qim_gateway_rate_limited_total", {"scope": "connection"}) == 0
    finally:
        s.abort()
        server.close()
