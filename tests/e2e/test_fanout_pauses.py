"""Pauses at the fanout's worst moment: its delivery window holding batches (decisions
0162, 0163), during a 300-member group's burst with direct messages beside it, on a
private stack of two FanoutCoordinators (one Outbox partition, leased):

- SIGSTOP of the broker for 6 s, then SIGCONT: every delivery in flight waits (the
  fanout meanwhile produces what it had read into the window) or fails, the window
  drains or replays, and the fanout goes on;
- SIGSTOP of the fanout owning the Outbox partition past its lease, then SIGCONT: the
  other one takes the partition over from the committed position; the paused one, its
  batches still in flight, stops fanning out what it lost (counted) and is ready again.

After each: the group member and the direct receiver get every message once and in
order, neither fanout is left with batches in flight or unready, and the independent
audit finds no orphan."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time

import pytest

from qim.infra.redis.client import connect
from qim.proto.v1 import message_pb2
from qim.protocol import Opcode
from qim.stores.redis.registry import RedisShardRegistry
from tests.e2e.chaos import delivered_once, run_audit
from tests.e2e.rawclient import RawClient
from tests.e2e.test_direct_beside_group import _direct, pipelined
from tests.e2e.test_groups import create, gconv
from tests.e2e.test_shard_takeover import metric
from tests.fixtures import running_stack

LEASE_MS, RENEW_MS = 4000, 500
GROUP_SENDS, DIRECT_SENDS, MADE_UP = 60, 30, 297
FANOUTS = ("fanout", "fanout2")


@pytest.fixture(scope="module")
def two_fanouts(tmp_path_factory):
    env = {"QIM_SHARD_LEASE_MS": str(LEASE_MS), "QIM_SHARD_RENEW_MS": str(RENEW_MS)}
    with running_stack(tmp_path_factory.mktemp("fanout-pause"), nodes={"fanout": 2}, extra_env=env) as st:
        yield st


async def owner(stack) -> str:
    """The stack name of the fanout holding Outbox partition 0 (the registry, as an operator reads it)."""
    client = connect(stack.env["QIM_REDIS_ADDR"])
    try:
        live = [o.node_id for o in await RedisShardRegistry(client).owners("fanout", 1) if o.live]
    finally:
        await client.aclose()
    names = [n for n in FANOUTS for node in live if node.endswith("@" + stack.metrics[n])]
    return names[0] if names else ""


async def until(check, what: str, timeout_s: float = 60.0, every_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while True:
        got = await check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(every_s)


class Burst:
    """A 300-member group's messages and direct messages to one of its members, all
    pipelined at once; `check()` proves the member got each once, in order."""

    async def start(self, stack) -> None:
        base = random.getrandbits(40) + 1
        self.owner, self.member, self.peer = base, base + 1, base + 2
        gid = random.getrandbits(40) + 1
        self.clients = [await RawClient.login(stack, u) for u in (self.owner, self.member, self.peer)]
        op, _ = await create(self.clients[0], gid, [self.owner, self.member, *range(base + 10, base + 10 + MADE_UP)])
        assert op == Opcode.GROUP_OK
        self.group = [message_pb2.SendMessage(client_message_id=os.urandom(16), conversation_id=gconv(gid),
                                               message_type=1, body=b"g%03d" % i) for i in range(GROUP_SENDS)]
        self.direct = [message_pb2.SendMessage(client_message_id=os.urandom(16), recipient_user_id=self.member,
                                               conversation_id=_direct(self.peer, self.member), message_type=1,
                                               body=b"d%03d" % i) for i in range(DIRECT_SENDS)]
        self.sends = asyncio.gather(pipelined(self.clients[0], self.group), pipelined(self.clients[2], self.direct))

    async def check(self, stack) -> None:
        group_seqs, direct_seqs = await self.sends
        assert group_seqs == sorted(group_seqs) and direct_seqs == sorted(direct_seqs)
        for client in self.clients:
            await client.close()
        # each conversation once and in its order (delivered_once also fails on any message twice)
        for sent in (self.group, self.direct):
            await delivered_once(stack, self.member, [m.body for m in sent], timeout=120)


async def window_busy(stack) -> float:
    """Batches in flight over both fanouts, once it is above zero (the pause's moment)."""
    n = sum(metric(stack, name, "qim_fanout_batches_in_flight") for name in FANOUTS)
    return n if n > 0 else 0.0


async def settled(stack) -> bool:
    """Both fanouts ready, with no batch in flight."""
    return all(stack.healthz(n)[0] == 200 and metric(stack, n, "qim_fanout_batches_in_flight") == 0
               for n in FANOUTS)


async def test_the_broker_paused_with_batches_in_flight_loses_and_doubles_nothing(two_fanouts):
    st = two_fanouts
    await until(lambda: owner(st), "a fanout holding the Outbox partition")
    burst = Burst()
    await burst.start(st)
    busy = await until(lambda: window_busy(st), "batches in flight", 30, every_s=0.02)
    broker = st.engines.kafka.pid
    os.kill(broker, signal.SIGSTOP)
    try:
        await asyncio.sleep(3)
        held = await window_busy(st)  # what the fanout produced from records it had read before the pause
        await asyncio.sleep(3)
    finally:
        os.kill(broker, signal.SIGCONT)
    await burst.check(st)
    await until(lambda: settled(st), "both fanouts ready with an empty window")
    audit = run_audit(st)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    print(f"broker paused with {busy:.0f} batch(es) in flight, {held:.0f} after 3 s")


async def test_the_fanout_paused_past_its_lease_with_batches_in_flight_doubles_nothing(two_fanouts):
    st = two_fanouts
    paused = await until(lambda: owner(st), "a fanout holding the Outbox partition")
    other = next(n for n in FANOUTS if n != paused)
    lost_before = metric(st, paused, "qim_shard_lost_total")
    burst = Burst()
    await burst.start(st)
    busy = await until(lambda: window_busy(st), "batches in flight", 30, every_s=0.02)
    os.kill(st.pids[paused], signal.SIGSTOP)
    try:
        took = await until(lambda: _is(owner(st), other), "the takeover", LEASE_MS / 1000 + 15)
        assert took
    finally:
        os.kill(st.pids[paused], signal.SIGCONT)
    await burst.check(st)
    await until(lambda: settled(st), "both fanouts ready with an empty window")
    assert metric(st, paused, "qim_shard_lost_total") > lost_before  # it noticed, and stopped fanning out
    audit = run_audit(st)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    print(f"fanout {paused} paused with {busy:.0f} batch(es) in flight; {other} took the partition over")


async def _is(name, want: str) -> bool:
    return (await name) == want
