"""Shard takeover between nodes of one kind (docs/design.md §13;
docs/decisions/0040-scale-leases-and-fencing.md), on a private stack of 2 mailbox and 2
session nodes under traffic:

- SIGKILL of a MailboxNode: its shards are taken over within the lease + one renewal,
  from min(W)+1, and pulls of its users are served again (the takeover time is reported);
  restarted under its id it gets its share back by release; every acknowledged message
  reaches every recipient once and in order, and the audit finds no orphan;
- SIGSTOP of a mailbox owner past its lease, then SIGCONT: it stops serving what it lost
  (counted), nothing is doubled, and the shards come back to it by release;
- SIGKILL of a SessionProjection node: the survivor serves the list of its users, exact;
- a second process with a live node's id refuses to start, naming the id.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from qim._core import ids
from qim.errors import ErrorCode
from qim.infra.redis.client import connect
from qim.protocol import Opcode
from qim.stores.redis.registry import RedisShardRegistry
from tests.e2e.chaos import Conversation, delivered_once, run_audit
from tests.e2e.rawclient import RawClient, first_pull_after
from tests.e2e.sessionclient import entry_when, pull_page
from tests.fixtures import TEST_SHARD_COUNT, running_stack

LEASE_MS, RENEW_MS = 4000, 500


@pytest.fixture(scope="module")
def two_of_each(tmp_path_factory):
    env = {"QIM_SHARD_LEASE_MS": str(LEASE_MS), "QIM_SHARD_RENEW_MS": str(RENEW_MS)}
    with running_stack(tmp_path_factory.mktemp("takeover"), mailboxes=2, sessions=2, extra_env=env) as st:
        yield st


def metric(stack, service: str, name: str) -> float:
    text = urllib.request.urlopen(f"http://{stack.metrics[service]}/metrics", timeout=2).read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith(name + " ") or line.startswith(name + "{"))


async def owners(stack, kind: str) -> dict[int, str]:
    """shard -> node id of its live owner (the registry, read as an operator would)."""
    client = connect(stack.env["QIM_REDIS_ADDR"])
    try:
        return {o.shard: o.node_id for o in await RedisShardRegistry(client).owners(kind, TEST_SHARD_COUNT)
                if o.live}
    finally:
        await client.aclose()


def node_id(stack, name: str) -> str:
    var = "QIM_MAILBOX_LISTEN" if name.startswith("mailbox") else "QIM_SESSION_LISTEN"
    return f"{name.rstrip('0123456789')}@{stack.instance_env[name][var]}"


def user_on(node: str, table: dict[int, str]) -> int:
    """A fresh user whose shard `node` owns."""
    while True:
        user = random.getrandbits(40) + 1
        if table.get(ids.user_placement(0, user, TEST_SHARD_COUNT)[2]) == node:
            return user


async def until_split(stack, kind: str, names: tuple[str, str], timeout: float = 30.0) -> dict[int, str]:
    """Wait until both nodes own shards and together all of them (rebalanced)."""
    want = {node_id(stack, n) for n in names}
    deadline = time.monotonic() + timeout
    while True:
        table = await owners(stack, kind)
        if len(table) == TEST_SHARD_COUNT and set(table.values()) == want:
            return table
        assert time.monotonic() < deadline, f"{kind} shards never split over {want}: {table}"
        await asyncio.sleep(0.2)


class Traffic:
    """Conversations sending numbered messages until stopped; `check()` proves delivery."""

    def __init__(self, stack, pairs: list[tuple[int, int]]) -> None:
        self.convs = [Conversation(stack, a, b) for a, b in pairs]
        self.stack = stack
        self._stop = asyncio.Event()
        self._tasks = [asyncio.get_running_loop().create_task(self._run(c, i)) for i, c in enumerate(self.convs)]

    async def _run(self, conv: Conversation, i: int) -> None:
        n = 0
        while not self._stop.is_set():
            await conv.send(b"t%d-%d" % (i, n), deadline_s=90)
            n += 1
            await asyncio.sleep(0.05)

    async def stop_and_check(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)
        for conv in self.convs:
            if conv.client is not None:
                await conv.client.close()
                conv.client = None
        for conv in self.convs:
            assert conv.order, "nothing was sent"
            entries = await delivered_once(self.stack, conv.peer, conv.order, timeout=90)
            assert [e.message_id for e in entries] == [conv.acks[b].message_id for b in conv.order]


async def test_a_killed_mailbox_nodes_shards_are_taken_over_and_nothing_is_lost(two_of_each):
    st = two_of_each
    table = await until_split(st, "mailbox", ("mailbox", "mailbox2"))
    victim = node_id(st, "mailbox")
    pairs = [(user_on(victim, table), user_on(victim, table)), (user_on(victim, table), random.getrandbits(40) + 1),
             (random.getrandbits(40) + 1, user_on(victim, table))]
    traffic = Traffic(st, pairs)
    await asyncio.sleep(2)
    st.kill_service("mailbox")
    took = await first_pull_after(st, user_on(victim, table), time.monotonic(), timeout=30.0)
    assert took <= (LEASE_MS + 2 * RENEW_MS) / 1000 + 3, took  # lease + one renewal (+ catch-up, load)
    assert set((await owners(st, "mailbox")).values()) == {node_id(st, "mailbox2")}
    await asyncio.sleep(2)
    st.start_service("mailbox")  # back under its id: its share is handed back by release
    await until_split(st, "mailbox", ("mailbox", "mailbox2"))
    await asyncio.sleep(1)
    await traffic.stop_and_check()
    audit = run_audit(st)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    print(f"mailbox takeover: kill -> first pull served {took:.2f} s")


async def test_a_paused_mailbox_owner_loses_its_shards_and_doubles_nothing(two_of_each):
    st = two_of_each
    table = await until_split(st, "mailbox", ("mailbox", "mailbox2"))
    paused = node_id(st, "mailbox2")
    pairs = [(random.getrandbits(40) + 1, user_on(paused, table)), (user_on(paused, table), user_on(paused, table))]
    traffic = Traffic(st, pairs)
    await asyncio.sleep(1.5)
    lost_before = metric(st, "mailbox2", "qim_shard_lost_total")
    pid = st.pids["mailbox2"]
    os.kill(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 30
        while set((await owners(st, "mailbox")).values()) != {node_id(st, "mailbox")}:
            assert time.monotonic() < deadline, "the paused owner's shards were not taken over"
            await asyncio.sleep(0.2)
        await asyncio.sleep(1)
    finally:
        os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + 20
    while metric(st, "mailbox2", "qim_shard_lost_total") <= lost_before:  # it noticed, counted, stopped
        assert time.monotonic() < deadline, "the resumed owner never reported its lost shards"
        await asyncio.sleep(0.2)
    await until_split(st, "mailbox", ("mailbox", "mailbox2"))  # handed back by release, new epochs
    await asyncio.sleep(1)
    await traffic.stop_and_check()
    assert metric(st, "mailbox", "qim_mailbox_dirty_total") == 0
    assert metric(st, "mailbox2", "qim_mailbox_dirty_total") == 0
    audit = run_audit(st)
    assert audit.returncode == 0, audit.stdout + audit.stderr


async def test_a_killed_session_nodes_users_get_their_exact_list_from_the_survivor(two_of_each):
    st = two_of_each
    table = await until_split(st, "session", ("session", "session2"))
    me = user_on(node_id(st, "session2"), table)
    peer = random.getrandbits(40) + 1
    sender = await RawClient.login(st, peer, device=7)
    for n in range(3):
        op, _ = await sender.send_text(me, b"s%d" % n)
        assert op == Opcode.SEND_ACK
    client = await RawClient.login(st, me, device=8)
    conv = ids.conversation_id_direct(0, me, peer)
    await entry_when(client, conv, lambda e: e.unread == 3, timeout=20)
    st.kill_service("session2")
    killed = time.monotonic()
    op, _ = await sender.send_text(me, b"while the owner is dead")
    assert op == Opcode.SEND_ACK
    while True:  # UNAVAILABLE until the survivor took the shard over (the SDK retries the same way)
        op, page = await pull_page(client)
        if op == Opcode.SESSION_LIST_BATCH:
            break
        assert page.code == ErrorCode.UNAVAILABLE and time.monotonic() - killed < 30, page
        await asyncio.sleep(0.1)
    entry = await entry_when(client, conv, lambda e: e.unread == 4, timeout=30)  # served by the survivor
    assert entry.last_message.body == b"while the owner is dead"
    assert set((await owners(st, "session")).values()) == {node_id(st, "session")}
    st.start_service("session2")
    await until_split(st, "session", ("session", "session2"))
    for c in (sender, client):
        await c.close()


def test_a_second_process_with_a_live_nodes_id_refuses_to_start(two_of_each):
    st = two_of_each
    free = [f"127.0.0.1:{p}" for p in _free_ports(2)]
    env = {**os.environ, **st.env, **st.instance_env["mailbox2"], "QIM_MAILBOX_LISTEN": free[0],
           "QIM_MAILBOX_METRICS_LISTEN": free[1], "QIM_NODE_ID": node_id(st, "mailbox2")}
    proc = subprocess.run([sys.executable, "-m", "qim.app", "mailbox"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("qim-mailbox:")]
    assert len(lines) == 1 and repr(node_id(st, "mailbox2")) in lines[0] and "in use by a live process" in lines[0]


def _free_ports(n: int) -> list[int]:
    from qim.dev._proc import pick_ports

    return pick_ports(n)
