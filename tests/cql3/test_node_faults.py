"""The three-node gate of the archive tier (issue 35 §3; `make test-cql3`, which sets
QIM_TEST_CQL_NODES=3 so shared_cassandra is a cluster of three, keyspaces RF 3,
LOCAL_QUORUM): the whole stack with qim-archiver sends while one Cassandra node is
SIGKILLed and later restarted on its data, then while another is SIGSTOPped past the
client request timeout (REQUEST_TIMEOUT_S) and resumed. Every acknowledged send is in
the history read back through the SDK across the hot floor, none twice, and
`qimctl audit archive` prints zeros (check_everything, tests/e2e/test_archive_crash.py).

Runs after the contract suite on the same cluster (it leaves every node running again)."""

from __future__ import annotations

import asyncio
import time

from qim.dev.cassandra_cluster import pause, resume, wait_cluster_ready
from qim.stores.cql.session import REQUEST_TIMEOUT_S
from tests.e2e.archive import archive_stack, wait_floor
from tests.e2e.sdkclient import client, close_all
from tests.e2e.test_archive_crash import CONVERSATIONS, Traffic, check_everything, metric
from tests.sdk.realstack import users

PAUSE_S = REQUEST_TIMEOUT_S * 2.5  # well past the driver's request timeout


async def test_a_node_killed_and_one_paused_lose_and_double_nothing(tmp_path, shared_cassandra):
    assert len(shared_cassandra.nodes) == 3, "run through `make test-cql3` (QIM_TEST_CQL_NODES=3)"
    killed, paused = shared_cassandra.nodes[0], shared_cassandra.nodes[2]
    with archive_stack(tmp_path / "s", shared_cassandra) as st:
        a, *peers = users(1 + CONVERSATIONS)
        ca = await client(st, tmp_path, a)
        await ca.connect()
        traffic = Traffic(ca, peers)
        await traffic.open()
        await traffic.send(30)
        conv = next(iter(traffic.convs))
        await wait_floor(st, conv, max(traffic.sent[conv]) - 1, timeout=180)
        # 1: node 1 (a seed, the first contact point) SIGKILLed under traffic, restarted
        sending = asyncio.create_task(traffic.send(40, pause=0.02))
        await asyncio.sleep(0.3)
        t0 = time.monotonic()
        killed.kill()
        await sending
        await traffic.send(20)  # sends never depend on the archive
        sending = asyncio.create_task(traffic.send(40, pause=0.05))
        await asyncio.to_thread(killed.start, 600)  # the same data and ports
        await sending
        await asyncio.to_thread(wait_cluster_ready, shared_cassandra.nodes, 600)
        print(f"\nkill: node {killed.host} down and back in {time.monotonic() - t0:.1f} s")
        # 2: node 3 frozen (SIGSTOP) past the client timeout under traffic, resumed
        sending = asyncio.create_task(traffic.send(60, pause=0.05))
        await asyncio.sleep(0.3)
        t0 = time.monotonic()
        pause(paused)
        try:
            await asyncio.sleep(PAUSE_S)
        finally:
            resume(paused)
        await sending
        print(f"pause: node {paused.host} frozen {time.monotonic() - t0:.1f} s")
        t0 = time.monotonic()
        await check_everything(st, traffic)
        failures = await metric(st, "archiver", "qim_archiver_write_failures_total")
        total = sum(len(s) for s in traffic.sent.values())
        print(f"gate: {total} acknowledged sends in {len(traffic.sent)} conversations all read back once; "
              f"archiver write failures {failures:.0f}; caught up and audited in {time.monotonic() - t0:.1f} s")
        await close_all(ca)
