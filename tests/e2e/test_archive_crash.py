"""Crash gates of the archive tier: qim-archiver SIGKILLed mid-batch (after a
batch's rows were written, before its position moved; and at a random moment under
traffic) and restarted; Cassandra SIGKILLed and restarted under traffic. Sends never
stop; afterwards every conversation's history pages byte-exact across the hot floor
(nothing lost, nothing twice) and `qimctl audit archive` prints zeros."""

from __future__ import annotations

import asyncio
import os
import random
import signal

from qim.consts import MESSAGE_TYPE_CONTROL
from qim.sdk.requests import pull_history
from tests.e2e.archive import archive_stack, floor_of, qimctl, wait_floor
from tests.e2e.sdkclient import client, close_all
from tests.fixtures import SharedCassandra
from tests.sdk.realstack import eventually, users

ZEROS = "missing=0 index_missing=0 mismatched=0 seq_conflicts=0"
CONVERSATIONS = 4


class Traffic:
    """One sender writing to CONVERSATIONS peers, remembering every acknowledged send."""

    def __init__(self, sender, peers: list[int]) -> None:
        self.sender = sender
        self.peers = peers
        self.convs: dict[bytes, int] = {}
        self.sent: dict[bytes, dict[int, bytes]] = {}  # conversation -> seq -> body

    async def open(self) -> None:
        for p in self.peers:
            conv = (await self.sender.open_direct(p)).conversation_id
            self.convs[conv] = p
            self.sent[conv] = {}

    async def send(self, n: int, pause: float = 0.0) -> None:
        for _ in range(n):
            conv = random.choice(list(self.convs))
            body = os.urandom(random.choice((10, 200, 9000)))
            ack = await self.sender.send(conv, body)
            self.sent[conv][ack.conversation_seq] = body
            if pause:
                await asyncio.sleep(pause)


async def metric(st, service: str, name: str) -> float:
    """The value of one unlabelled metric of a service's /metrics."""
    import urllib.request

    text = await asyncio.to_thread(lambda: urllib.request.urlopen(f"http://{st.metrics[service]}/metrics",
                                                                  timeout=5).read().decode())
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " "))


async def history(rt, conv: bytes, peer: int) -> dict[int, bytes]:
    """seq -> body of every non-CONTROL item of the conversation, paging OLDER by 7."""
    out, anchor = {}, 0
    while True:
        batch = await pull_history(rt, conv, peer, anchor_seq=anchor, limit=7)
        for item in batch.items:
            assert item.conversation_seq not in out, "a message twice"
            if item.message_type != MESSAGE_TYPE_CONTROL:
                out[item.conversation_seq] = item.body
        if not batch.has_more:
            return out
        anchor = batch.next_anchor


async def check_everything(st, traffic: Traffic) -> None:
    last = {conv: max(sent) for conv, sent in traffic.sent.items()}
    for conv, seq in last.items():
        await wait_floor(st, conv, seq - 3, timeout=120)  # most of it archived and trimmed
    for conv, peer in traffic.convs.items():
        assert floor_of(st, conv) > 0
        assert await history(traffic.sender.runtime, conv, peer) == traffic.sent[conv]
    audit = qimctl(st, "audit", "archive", "--timeout", "90")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert audit.stdout.strip().splitlines()[-1].endswith(ZEROS)


async def test_archiver_killed_mid_batch_and_restarted(tmp_path, shared_cassandra):
    with archive_stack(tmp_path / "s", shared_cassandra) as st:
        a, *peers = users(1 + CONVERSATIONS)
        ca = await client(st, tmp_path, a)
        await ca.connect()
        traffic = Traffic(ca, peers)
        await traffic.open()
        await traffic.send(20)
        # 1: killed after a batch's rows are in the archive, before its position moved
        st.stop_service("archiver")
        st.start_service("archiver", {"QIM_FAULT_INJECTION": "1", "QIM_ARCHIVER_FAULT_POINT": "after_write"})
        await traffic.send(10)
        await eventually(lambda: not st.alive("archiver"), 60, "the archiver killing itself after a batch write")
        st.stop_service("archiver")  # reap
        await traffic.send(10)  # sends go on while no archiver runs
        st.start_service("archiver")
        st.wait_ready(["archiver"])
        # 2: SIGKILL at a random moment while traffic flows
        sending = asyncio.create_task(traffic.send(60, pause=0.01))
        await asyncio.sleep(random.uniform(0.3, 1.5))
        st.kill_service("archiver")
        await sending
        st.start_service("archiver")
        st.wait_ready(["archiver"])
        await check_everything(st, traffic)
        await close_all(ca)


async def test_cassandra_restarted_under_traffic(tmp_path, private_cassandra):
    node = SharedCassandra(private_cassandra.addr, private_cassandra)
    with archive_stack(tmp_path / "s", node) as st:
        a, *peers = users(1 + CONVERSATIONS)
        ca = await client(st, tmp_path, a)
        await ca.connect()
        traffic = Traffic(ca, peers)
        await traffic.open()
        await traffic.send(30)
        conv = next(iter(traffic.convs))
        await wait_floor(st, conv, max(traffic.sent[conv]) - 1)
        sending = asyncio.create_task(traffic.send(40, pause=0.02))
        await asyncio.sleep(0.3)
        private_cassandra.kill()  # SIGKILL under traffic
        await sending
        await traffic.send(20)  # while the archive is down: every send is acknowledged
        archiver = await metric(st, "archiver", "qim_archiver_write_failures_total")
        sending = asyncio.create_task(traffic.send(40, pause=0.02))
        await asyncio.to_thread(private_cassandra.start)  # on the same data and ports
        await sending
        await check_everything(st, traffic)
        assert archiver > 0 or await metric(st, "archiver", "qim_archiver_write_failures_total") > 0
        await close_all(ca)


async def test_a_pass_failed_on_a_redis_instance_outage_is_read_again(tmp_path, shared_cassandra):
    """The archiver's batch held records of a conversation whose commit bucket is on a
    Redis instance that is down (its retention-class read fails): the pass fails, and the
    next pass must read that batch again from the position, not the records after it
    (before, it moved the position over rows never written: the audit's `missing`)."""
    from qim.dev.redis_instances import layout_of
    from tests.e2e.instancegate import Crowd

    with archive_stack(tmp_path / "s", shared_cassandra, engines_kw={"redis_instances": 3}) as st:
        es = st.engines
        killed = es.redises[1]
        crowd = Crowd(st, layout_of(es.redis_addrs, es.shard_count), killed.addr)
        on_killed, elsewhere = crowd.senders[1], crowd.senders[2]  # commit buckets on instances 1 and 2
        for i in range(5):
            await on_killed.send(f"before {i}".encode(), 60)
        archiver = st.pids["archiver"]
        os.kill(archiver, signal.SIGSTOP)  # lagging behind: a backlog with both conversations in it
        try:
            for i in range(5):
                await on_killed.send(f"lag {i}".encode(), 60)
                await elsewhere.send(f"lag {i}".encode(), 60)
            await asyncio.to_thread(killed.kill)
        finally:
            os.kill(archiver, signal.SIGCONT)
        for i in range(30):  # newer records of a live instance only, while the other is down
            await elsewhere.send(f"outage {i}".encode(), 60)
            await asyncio.sleep(0.1)
        await asyncio.to_thread(killed.start, 60)
        await on_killed.send(b"after", 120)
        audit = await asyncio.to_thread(qimctl, st, "audit", "archive", "--timeout", "90")
        assert audit.returncode == 0 and audit.stdout.strip().splitlines()[-1].endswith(ZEROS), \
            audit.stdout + audit.stderr
        for s in (on_killed, elsewhere):
            if s.client is not None:
                await s.client.close()
