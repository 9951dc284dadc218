"""Rolling restart under traffic (docs/operations.md "Rolling upgrade"): `qim-dev stack
roll` restarts every node of every kind of the running stack, one at a time in the
order of qim/dev/rolling.py, the layout taken from the stack itself (stack.json: N nodes
of a kind are all rolled), while senders keep sending. Afterwards, checked on what the
apps are told by code that does not share the SDK (tests/e2e/chaos.py over the raw
frame client): every acknowledged message reaches its recipient and its sender's other
devices exactly once and in send order, a retried send kept its coordinates, and the
independent audit (`qimctl audit dispatch`) reports zeros."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys

from qim.dev.rolling import rolling_order
from qim.dev.stack import Stack
from qim.errors import ErrorCode
from qim.protocol import Opcode
from tests.e2e.chaos import Conversation, delivered_once, run_audit

SENDERS = 4


class RollingSender(Conversation):
    """chaos.Conversation whose retry also covers the gateway closing the connection (a
    restarted gateway): the same client_message_id until the ACK, as the SDK does."""

    async def send(self, body: bytes, deadline_s: float = 120.0) -> None:
        cmid = os.urandom(16)
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_s
        while True:
            try:
                op, reply = await (await self._conn()).send_text(self.peer, body, cmid=cmid)
                if op == Opcode.SEND_ACK:
                    if body in self.acks:  # a retry's ACK names the first commit
                        assert (self.acks[body].message_id, self.acks[body].conversation_seq) == \
                            (reply.message_id, reply.conversation_seq)
                    else:
                        self.order.append(body)
                    self.acks[body] = reply
                    return
                assert reply.code == ErrorCode.UNAVAILABLE, reply
            except AssertionError as exc:
                if "connection closed" not in str(exc):
                    raise
                await self._drop()
            except Exception:  # connection dropped or timed out: reconnect and retry
                await self._drop()
            if loop.time() > end:
                raise AssertionError(f"message {body!r} not acknowledged within {deadline_s}s")
            await asyncio.sleep(0.2)

    async def _drop(self) -> None:
        if self.client is not None:
            await self.client.close()
        self.client = None


async def _traffic(conv: "RollingSender", tag: str, stop: asyncio.Event) -> list[bytes]:
    sent = []
    i = 0
    while not stop.is_set():
        body = f"{tag}-{i:04d}".encode()
        await conv.send(body, deadline_s=120)
        sent.append(body)
        i += 1
        await asyncio.sleep(0.05)
    return sent


async def test_every_node_restarted_in_turn_under_traffic_loses_duplicates_and_reorders_nothing(ops_stack):
    st = ops_stack
    names = Stack.load(st.dir).names
    order = rolling_order(names)
    assert sorted(order) == sorted(names) and order[0].startswith("gateway") and order[-1].startswith("writer")
    base = random.getrandbits(40) + 1
    convs = [RollingSender(st, base + 2 * i, base + 2 * i + 1) for i in range(SENDERS)]
    stop = asyncio.Event()
    traffic = [asyncio.create_task(_traffic(c, f"roll{i}", stop)) for i, c in enumerate(convs)]
    await asyncio.sleep(2)  # traffic flowing before the first restart
    roll = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "qim.dev.cli", "stack", "roll",
                                                    "--dir", str(st.dir)], capture_output=True, text=True, timeout=600)
    assert roll.returncode == 0, roll.stdout + roll.stderr
    assert [ln.split()[0] for ln in roll.stdout.splitlines()] == order
    await asyncio.sleep(2)  # traffic after the last restart too
    stop.set()
    sent = await asyncio.gather(*traffic)
    for conv, bodies in zip(convs, sent):
        assert len(bodies) > 10, "the senders hardly sent during the roll"
        assert conv.order == bodies  # each ACKed once, in order (a retry's ACK kept its coordinates)
        entries = await delivered_once(st, conv.peer, bodies, timeout=120)
        assert [e.message_id for e in entries] == [conv.acks[b].message_id for b in bodies]
        own = await delivered_once(st, conv.sender, bodies, timeout=120)
        assert [e.client_message_id for e in own] == [conv.acks[b].client_message_id for b in bodies]
    audit = await asyncio.to_thread(run_audit, st)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert Stack.load(st.dir).restarts.get("gateway", 0) <= 1  # rolled by request, not by deaths
