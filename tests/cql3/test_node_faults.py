"""The three-node gate of the whole storage tier (issue 35 §3; `make test-cql3`, which
sets QIM_TEST_CQL_NODES=3 so shared_cassandra is a cluster of three, keyspaces RF 3,
LOCAL_QUORUM). The stack: three Redis instances (decision 0096's layout), the CQL
MailboxStore (QIM_MAILBOX_STORE=cql, decision 0102) and the archive tier (qim-archiver,
a tiny hot window). Under traffic the whole time:

1. Cassandra node 1 (a seed, the first contact point) SIGKILLed and restarted on its data;
2. Cassandra node 3 SIGSTOPped past the driver's request timeout (REQUEST_TIMEOUT_S), resumed;
3. Redis instance 2 (not the home: it holds MailboxShards and a third of the commit
   buckets) SIGKILLed and restarted on its AOF after longer than the shard lease.

The traffic: raw senders of direct conversations (one per commit-bucket instance) and of
a group (its commit bucket on the killed Redis instance), each message retried under its
client_message_id until ACKed (tests/e2e/instancetraffic.py), receivers pulling from
their own cursors the whole time; and an SDK client sending to CONVERSATIONS peers
during the Cassandra faults. Then: every ACKed message delivered to every recipient once
and in order on the running cursors and on a pull from 0, no cursor went back, the SDK's
history paged back across the hot floor byte-exact, `qimctl audit dispatch` and
`qimctl audit archive` at zero, and the CQL mailbox's frontier rows of every receiver's
MailboxShard advanced past where they were before the faults.

Runs after the contract suite on the same cluster (it leaves every node running again)."""

from __future__ import annotations

import asyncio
import time

from qim.dev.cassandra_cluster import pause, resume, wait_cluster_ready
from qim.dev.redis_instances import layout_of
from qim.stores.cql.session import REQUEST_TIMEOUT_S
from tests.cql3.test_cql_mailbox import frontier_rows
from tests.e2e.archive import archive_stack, qimctl, wait_floor
from tests.e2e.instancegate import TENANT, Crowd, until
from tests.e2e.sdkclient import client, close_all
from tests.e2e.test_archive_crash import CONVERSATIONS, Traffic, check_everything, metric
from tests.e2e.test_redis_instance_restart import HEAL_S, SEND_DEADLINE_S
from tests.e2e.test_session_redis_restart import OUTAGE_S
from tests.sdk.realstack import users

PAUSE_S = REQUEST_TIMEOUT_S * 2.5  # well past the driver's request timeout
KILLED_REDIS = 1  # not the home instance (0): MailboxShards and commit buckets


async def _frontier(st, shards) -> dict[int, int]:
    """shard -> the frontier_offset of its highest-epoch frontier row (-1: none yet)."""
    return {s: (rows[0][1] if rows else -1) for s, rows in (await frontier_rows(st, shards)).items()}


async def test_the_whole_tier_loses_and_doubles_nothing_through_cassandra_and_redis_faults(tmp_path,
                                                                                           shared_cassandra):
    assert len(shared_cassandra.nodes) == 3, "run through `make test-cql3` (QIM_TEST_CQL_NODES=3)"
    killed, paused = shared_cassandra.nodes[0], shared_cassandra.nodes[2]
    with archive_stack(tmp_path / "s", shared_cassandra, extra_env={"QIM_MAILBOX_STORE": "cql"},
                       engines_kw={"redis_instances": 3}) as st:
        st.scylla = shared_cassandra.scylla(st.keyspace)
        es = st.engines
        assert len(es.redises) == 3
        layout = layout_of(es.redis_addrs, es.shard_count)
        rkilled = es.redises[KILLED_REDIS]
        crowd = Crowd(st, layout, rkilled.addr)
        shards = sorted({layout.user_shard(TENANT, u) for u in crowd.pullers})

        a, *peers = users(1 + CONVERSATIONS)
        ca = await client(st, tmp_path, a)
        await ca.connect()
        traffic = Traffic(ca, peers)
        await traffic.open()

        await crowd.start(SEND_DEADLINE_S)
        try:
            await traffic.send(30)
            await until(lambda: crowd.acked(3), "every sender ACKed before the faults", HEAL_S)
            conv = next(iter(traffic.convs))
            await wait_floor(st, conv, max(traffic.sent[conv]) - 1, timeout=180)
            before = await _frontier(st, shards)
            # 1: Cassandra node 1 SIGKILLed under traffic, restarted on its data
            sending = asyncio.create_task(traffic.send(40, pause=0.02))
            await asyncio.sleep(0.3)
            t0 = time.monotonic()
            killed.kill()
            await sending
            sending = asyncio.create_task(traffic.send(40, pause=0.05))
            await asyncio.to_thread(killed.start, 600)  # the same data and ports
            await sending
            await asyncio.to_thread(wait_cluster_ready, shared_cassandra.nodes, 600)
            print(f"\nkill: cassandra {killed.host} down and back in {time.monotonic() - t0:.1f} s")
            # 2: Cassandra node 3 frozen (SIGSTOP) past the client timeout under traffic, resumed
            sending = asyncio.create_task(traffic.send(60, pause=0.05))
            await asyncio.sleep(0.3)
            t0 = time.monotonic()
            pause(paused)
            try:
                await asyncio.sleep(PAUSE_S)
            finally:
                resume(paused)
            await sending
            print(f"pause: cassandra {paused.host} frozen {time.monotonic() - t0:.1f} s")
            # 3: Redis instance 2 SIGKILLed (by its own pid) and restarted on its AOF
            await crowd.more(3, "raw traffic flowing after the Cassandra faults", HEAL_S)
            t0 = time.monotonic()
            await asyncio.to_thread(rkilled.kill)
            await asyncio.sleep(OUTAGE_S)
            await asyncio.to_thread(rkilled.start, 60)
            await crowd.more(3, "raw traffic flowing again after the Redis restart", HEAL_S)
            print(f"redis: instance {rkilled.name} down and back, traffic flowing in {time.monotonic() - t0:.1f} s")
        finally:
            await crowd.finish()
        # every ACKed message to every recipient once and in order (running cursors, a pull
        # from 0), no cursor back, `qimctl audit dispatch` at zero
        await crowd.check_delivered(HEAL_S)
        # the SDK's history across the hot floor byte-exact, and `qimctl audit archive` at zero
        t0 = time.monotonic()
        try:
            await check_everything(st, traffic)
        except AssertionError as exc:  # lag or loss? the audit once more a minute later, and the archiver's log
            await asyncio.sleep(60)
            again = await asyncio.to_thread(qimctl, st, "audit", "archive", "--timeout", "90")
            raise AssertionError(f"{exc}\n--- audit archive 60 s later: {again.stdout.strip().splitlines()[-1:]}"
                                 f"\n--- archiver log:\n{st.log_tail('archiver', 40)}") from None
        # the CQL mailbox materialized every receiver's shard past where it stood before
        after = await _frontier(st, shards)
        assert all(after[s] > before[s] for s in shards), (before, after)
        failures_n = await metric(st, "archiver", "qim_archiver_write_failures_total")
        senders = crowd.senders
        raw = sum(len(s.order) for s in senders)
        sdk = sum(len(s) for s in traffic.sent.values())
        print(f"gate: {raw} raw ACKed sends ({[len(s.order) for s in senders]}, refusals and drops "
              f"{ {s.name: (len(s.refused), s.dropped) for s in senders} }) and {sdk} SDK sends in "
              f"{len(traffic.sent)} conversations, all delivered or read back once; archiver write failures "
              f"{failures_n:.0f}; audited in {time.monotonic() - t0:.1f} s; frontier {before} -> {after}")
        await close_all(ca)
