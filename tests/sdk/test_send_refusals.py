"""Refusals in the middle of a pipelined conversation keep its frames in ordinal order
and never hold a send for ever (qim/sdk/sender.py, qim/sdk/window.py, docs/decisions/0063).

The fake gateway is scripted per transmission: a chosen frame is answered RATE_LIMITED
at once (the gateway's bucket) or UNAVAILABLE a while later (the writer's "previous
send not yet sequenced"); every other frame meets the writer's previous-send rule. What
must hold: every send is ACKed in submission order, and after a refusal the earliest
refused send is the first to go out again (the others name it).
"""

from __future__ import annotations

import asyncio

import pytest

from qim.errors import ErrorCode
from qim.proto.v1 import common_pb2, message_pb2
from qim.protocol import Opcode
from qim.sdk.rategate import RateGate
from tests.sdk.fakegateway import FakeGateway
from tests.sdk.test_runtime import CONV, KEY, A, B, runtime


class Scripted(FakeGateway):
    """`script`: {(index of the send, its nth frame): ("rl", retry_after_ms) | ("late", s)}."""

    def __init__(self, key) -> None:
        super().__init__(key)
        self.require_previous = True
        self.order: list[bytes] = []
        self.script: dict[tuple[int, int], tuple[str, float]] = {}
        self.count: dict[bytes, int] = {}

    async def _send(self, stream, rid, user, body) -> None:
        req = message_pb2.SendMessage.FromString(body)
        cmid = req.client_message_id
        n = self.count[cmid] = self.count.get(cmid, 0) + 1
        kind = self.script.get((self.order.index(cmid) if cmid in self.order else -1, n))
        if kind is None:
            return await super()._send(stream, rid, user, body)
        self.frames.append(req)
        if kind[0] == "rl":
            stream.send(Opcode.ERROR, rid, common_pb2.Error(
                code=ErrorCode.RATE_LIMITED, message="x", request_opcode=Opcode.SEND_MESSAGE,
                retry_after_ms=int(kind[1])).SerializeToString())
            return

        async def late() -> None:
            await asyncio.sleep(kind[1])
            stream.send(Opcode.ERROR, rid, common_pb2.Error(
                code=ErrorCode.UNAVAILABLE, message="previous send not yet sequenced",
                request_opcode=Opcode.SEND_MESSAGE).SerializeToString())
        asyncio.get_running_loop().create_task(late())

    def sends(self) -> list[int]:
        """Every frame received, as the 1-based index of its send."""
        return [self.order.index(f.client_message_id) + 1 for f in self.frames]


@pytest.fixture
async def sgw():
    g = Scripted(KEY)
    g.addr = await g.start()
    yield g
    await g.stop()


async def three(sgw, tmp_path):
    rt = runtime(sgw, tmp_path, A)
    cmids = [await rt.submit_message(CONV, B, f"m{i}".encode()) for i in range(3)]  # stored only
    sgw.order = cmids
    return rt, cmids


async def acked_in_order(rt, cmids) -> None:
    acks = await asyncio.wait_for(asyncio.gather(*(rt.wait_ack(c) for c in cmids)), 8)
    assert [a.conversation_seq for a in acks] == [1, 2, 3]


async def test_a_closed_gate_never_waits_for_a_turn_while_holding_its_slot(sgw, tmp_path):
    # an older gateway (no limit advertised): s3's RATE_LIMITED closes the gate; s3 gets
    # the slot, goes again, is refused by the writer (it names s2), and s2's own refusal
    # comes after: s3 must give the slot up, or s2 waits for it while s3 waits for s2
    rt, cmids = await three(sgw, tmp_path)
    sgw.script = {(1, 1): ("late", 0.05), (2, 1): ("rl", 10)}
    await rt.connect()
    await acked_in_order(rt, cmids)
    await rt.close()


async def test_a_send_back_in_the_gates_line_goes_before_the_later_ones_the_writer_refused(sgw, tmp_path, monkeypatch):
    # paced at 10/s: s1 RATE_LIMITED (another device drained the bucket), s2 and s3
    # admitted and refused by the writer: neither may go again before s1
    limit = RateGate.limit
    monkeypatch.setattr(RateGate, "limit", lambda gate, rate, burst: limit(gate, 10, 40))
    rt, cmids = await three(sgw, tmp_path)
    sgw.script = {(0, 1): ("rl", 50), (1, 1): ("late", 0.0), (2, 1): ("late", 0.0)}
    await rt.connect()
    await acked_in_order(rt, cmids)
    assert sgw.sends() == [1, 2, 3, 1, 2, 3]
    await rt.close()


async def test_a_send_let_through_by_the_gate_waits_for_an_earlier_one_refused_meanwhile(sgw, tmp_path, monkeypatch):
    # paced with a mirror of one token at 20/s: s2 and s3 wait in the gate's line for
    # their first permit while the writer refuses s1 twice
    limit = RateGate.limit
    monkeypatch.setattr(RateGate, "limit", lambda gate, rate, burst: limit(gate, 20, 2))
    rt, cmids = await three(sgw, tmp_path)
    sgw.script = {(0, 1): ("late", 0.0), (0, 2): ("late", 0.0)}
    await rt.connect()
    await acked_in_order(rt, cmids)
    assert sgw.sends() == [1, 1, 1, 2, 3]
    await rt.close()
