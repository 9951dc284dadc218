"""No retry storm against the gateway's send-rate buckets (qim/sdk/rategate.py).

Against the in-process fake gateway charging the REAL token buckets of the gateway
(qim/services/gateway/ratelimit.py SendLimiter: 2 per second, burst 2, per user) for
SEND_MESSAGE and MARK_READ, with the writer's previous-send rule on. What must hold:

- every counted request the runtime transmits after a RATE_LIMITED reached it leaves no
  sooner than that reply's retry_after_ms (sends, their UNAVAILABLE retransmissions,
  MARK_READ through `ClientRuntime.request`: one gate for all of them);
- a request is refused at most once (a burst above the bucket is refused once, each
  request then goes out alone, one refill interval after the one before);
- the same when the gateway is not scheduled for a while (it reads nothing for 1.5 s
  after its first refusal and then finds every queued frame at once): nothing the
  runtime queued meanwhile lands as a burst.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from qim.errors import ErrorCode
from qim.proto.v1 import session_pb2
from qim.protocol import RATE_LIMITED_OPCODES, Opcode
from qim.sdk import ServerError
from qim.sdk import connection as sdk_connection
from qim.sdk.rategate import Permit, RateGate, gated_retry
from qim.sdk.retry import Backoff, with_retry
from qim.services.gateway.ratelimit import SendLimiter
from tests.sdk.fakegateway import FakeGateway
from tests.sdk.test_runtime import CONV, KEY, A, B, runtime

RATE = 2  # per second and burst, like tests/e2e/test_rate_limit_and_rotation.py
EARLY_S = 0.005  # monotonic clock and scheduling slack a transmission may be early by


@pytest.fixture
async def gw():
    g = FakeGateway(KEY)
    g.addr = await g.start()
    g.require_previous = True  # the writer's rule: a send whose previous one holds no commit gets UNAVAILABLE
    g.limiter = SendLimiter(RATE, RATE, 0, 0)
    yield g
    await g.stop()


def record_wire(monkeypatch) -> tuple[list[tuple[float, int]], list[tuple[float, float]]]:
    """What the runtimes of this process put on the wire from now on: (monotonic time,
    opcode) of every counted request, and (time received, retry_after_s) of every
    RATE_LIMITED reply."""
    sent: list[tuple[float, int]] = []
    refusals: list[tuple[float, float]] = []
    send_request, server_error = sdk_connection.Connection.send_request, sdk_connection._server_error

    def recording_send(self, opcode, body):
        if opcode in RATE_LIMITED_OPCODES:
            sent.append((time.monotonic(), opcode))
        return send_request(self, opcode, body)

    def recording_error(body):
        exc = server_error(body)
        if exc.code == ErrorCode.RATE_LIMITED:
            refusals.append((time.monotonic(), exc.retry_after_ms / 1000))
        return exc

    monkeypatch.setattr(sdk_connection.Connection, "send_request", recording_send)
    monkeypatch.setattr(sdk_connection, "_server_error", recording_error)
    return sent, refusals


@pytest.fixture
def wire(monkeypatch):
    """record_wire for the test."""
    return record_wire(monkeypatch)


def early_transmissions(sent, refusals) -> list[tuple[float, float]]:
    """(transmission time, the time a refusal received before it said 'not before')."""
    return [(t, r + hint) for t, _ in sent for r, hint in refusals if r < t < r + hint - EARLY_S]


async def mark_read(rt, seq: int) -> None:
    body = session_pb2.MarkRead(conversation_id=CONV, read_conversation_seq=seq, peer_user_id=B).SerializeToString()
    op, _ = await with_retry(lambda: rt.request(Opcode.MARK_READ, body), Backoff(budget=30.0))
    assert op == Opcode.MARK_READ_OK


async def burst(rt, n: int, marks: int):
    """n sends submitted back to back, `marks` MARK_READs beside them; the acks in
    submission order."""
    cmids = [await rt.submit_message(CONV, B, f"m{i}".encode()) for i in range(n)]
    acks, *_ = await asyncio.gather(asyncio.gather(*(rt.wait_ack(c) for c in cmids)),
                                    *(mark_read(rt, i + 1) for i in range(marks)))
    return acks


async def test_a_burst_above_the_rate_is_refused_once_per_request_and_honours_every_hint(gw, wire, tmp_path):
    rt = runtime(gw, tmp_path, A)
    await rt.connect()
    n, marks = 8, 2
    started = time.monotonic()
    acks = await burst(rt, n, marks)
    elapsed = time.monotonic() - started
    assert [a.conversation_seq for a in acks] == list(range(1, n + 1))  # every send, in submission order
    assert elapsed >= (n + marks - RATE) / RATE - 0.1, elapsed  # the bucket's pace: the limit did act
    sent, refusals = wire
    assert 0 < gw.refusals <= n + marks - RATE, f"{gw.refusals} refusals for {n + marks} requests"
    assert early_transmissions(sent, refusals) == []  # nothing left before the hint it had received
    assert rt.rate_gate.refusals == gw.refusals == len(refusals)  # the gate heard every refusal
    await rt.close()


async def test_a_gateway_that_stalls_after_refusing_finds_no_burst_of_retries(gw, wire, tmp_path):
    gw.stall_after_refusal_s = 1.5  # then every frame queued meanwhile arrives at once, the bucket full again
    rt = runtime(gw, tmp_path, A)
    await rt.connect()
    n = 8
    acks = await burst(rt, n, 0)
    assert [a.conversation_seq for a in acks] == list(range(1, n + 1))
    sent, refusals = wire
    assert 0 < gw.refusals <= n - RATE, f"{gw.refusals} refusals for {n} sends"
    assert early_transmissions(sent, refusals) == []
    assert rt.rate_gate.refusals == gw.refusals
    await rt.close()



async def test_an_ack_deadline_repeat_of_a_send_waits_for_the_hint_too(gw, wire, tmp_path):
    gw.push = False  # only the repeat's answer can settle the first send
    gw.limiter = SendLimiter(RATE, 1, 0, 0)  # burst 1: the second send is refused
    rt = runtime(gw, tmp_path, A, ack_deadline_s=0.2, probe_s=1.0)
    await rt.connect()
    gw.drop_acks = 1  # the first send commits and its ACK is lost: the ACK deadline repeats it
    cmids = [await rt.submit_message(CONV, B, f"m{i}".encode()) for i in range(2)]
    acks = [await rt.wait_ack(c) for c in cmids]
    assert [a.conversation_seq for a in acks] == [1, 2]
    sent, refusals = wire
    assert len(sent) >= 3 and refusals, (sent, refusals)  # a repeat went out while the gate was closed
    assert early_transmissions(sent, refusals) == []  # ... and not before the hint the refusal had given


# --- the gate itself (pure logic; the lower bounds are the server's hints) ------------
def rate_limited(ms: int) -> ServerError:
    return ServerError(ErrorCode.RATE_LIMITED, "x", retry_after_ms=ms)


async def test_a_closed_gate_lets_one_request_at_a_time_through_in_ticket_order_a_hint_apart():
    gate = RateGate()
    gate.refused(200)
    gate.refused(20)  # later and shorter: what was left of a refill interval, not a new interval
    refused_at = time.monotonic()
    passed: list[tuple[int, float]] = []
    holding = 0

    async def request(ticket: int) -> None:
        nonlocal holding

        async def send(permit: Permit) -> None:
            nonlocal holding
            holding += 1
            passed.append((ticket, time.monotonic() - refused_at))
            assert holding == 1, "two requests in flight while the gate is closed"
            await asyncio.sleep(0.01)
            holding -= 1

        await gate.through(send, ticket)

    await asyncio.gather(*(request(t) for t in (3, 1, 2)))  # asked for out of order
    assert [t for t, _ in passed] == [1, 2, 3]
    assert passed[0][1] >= 0.2 - EARLY_S  # not before the hint
    assert all(b - a >= 0.2 - EARLY_S for (_, a), (_, b) in zip(passed, passed[1:])), passed  # the largest hint apart
    assert gate.open and gate.try_acquire(gate.ticket()) is not None  # admitted, nobody waits: open again


async def test_a_refused_request_keeps_its_place_and_a_cancelled_one_frees_the_slot():
    gate = RateGate()
    gate.refused(30)
    first = await gate.acquire(1)
    order: list[int] = []

    async def waiter(ticket: int) -> None:
        permit = await gate.acquire(ticket)
        order.append(ticket)
        permit.close(None)

    later = asyncio.ensure_future(waiter(5))
    doomed = asyncio.ensure_future(gate.acquire(2))
    await asyncio.sleep(0.05)
    assert order == []  # the slot is held
    gate.refused(30)  # the connection reports the refusal before the holder hears of it
    first.close(rate_limited(30))
    again = asyncio.ensure_future(waiter(1))  # back in line with its ticket: ahead of 5
    doomed.cancel()  # in line, then cancelled: must not keep the slot
    await asyncio.wait_for(asyncio.gather(later, again), 5)
    assert order == [1, 5] and gate.open


async def test_gated_retry_surfaces_a_hint_beyond_its_budget_at_once():
    gate = RateGate()
    calls = 0

    async def send(permit: Permit):
        nonlocal calls
        calls += 1
        gate.refused(60_000)
        raise rate_limited(60_000)

    with pytest.raises(ServerError):
        await asyncio.wait_for(gated_retry(gate, send, Backoff(budget=30.0)), 5)
    assert calls == 1


# --- paced by the limit the gateway advertises (AuthOk.send_rate_per_s / send_burst) --
async def test_an_advertised_limit_paces_a_pipelined_burst_without_one_refusal(gw, wire, tmp_path):
    gw.limiter = SendLimiter(20, 20, 0, 0)  # 20 per second, burst 20: the SDK mirrors 20/s with 10
    gw.advertise = True
    rt = runtime(gw, tmp_path, A)
    await rt.connect()
    n, marks = 60, 4
    started = time.monotonic()
    acks = await burst(rt, n, marks)
    elapsed = time.monotonic() - started
    assert [a.conversation_seq for a in acks] == list(range(1, n + 1))  # every send, in submission order
    assert gw.refusals == 0 and rt.rate_gate.refusals == 0  # paced below the bucket, never refused
    sent, _ = wire
    assert len(sent) == n + marks  # one transmission each: no retry, no repeat
    assert elapsed >= (n + marks - 10) / 20 - 0.1, elapsed  # it did pace (the mirror's size, then its rate)
    await rt.close()


async def test_a_paced_gate_honours_a_refusal_then_paces_on():
    gate = RateGate()
    gate.limit(100, 4)  # a mirror of 2 at 100/s
    first = [gate.try_acquire(gate.ticket()) for _ in range(3)]
    assert first[0] is not None and first[1] is not None and first[2] is None  # the mirror's size
    gate.refused(150)  # another device drained the user's bucket
    refused_at = time.monotonic()
    permit = await gate.acquire(gate.ticket())
    assert time.monotonic() - refused_at >= 0.15 - EARLY_S and gate.open  # after the hint, and still pipelined
    permit.close(None)
