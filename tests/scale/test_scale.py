"""Scale out, done when (docs/design.md §13; docs/operations.md "Several nodes
of each kind"): on one stack of two nodes of every kind and three Kafka brokers
(tests/scale/harness.py), under traffic of SDK clients spread over both gateways and
frame-level conversations, each test checking what every app is told (nothing lost,
doubled, reordered or corrupt; listings and unread exact) and the orphan audit's four
zeros:

- a recipient on the other gateway gets every message by push while connected, one push
  per gateway holding its devices (qim_mailbox_push_gateways);
- a duplicate login on the other gateway kicks exactly the old connection, once;
- SIGKILL of a MailboxNode, a SessionProjection node, a FanoutCoordinator and a gateway,
  each restarted afterwards, and last of one of the three brokers (left down);
- SIGSTOP of a mailbox owner past its lease, then SIGCONT: it counts its lost shards and
  serves nothing of them (its stale writes are refused by the fence inside the Lua);
- every process (services, Redis, brokers) stopped at once past a lease, then resumed;
- a mailbox and a session node added under traffic, then removed by a clean stop;
- the takeover time, SIGKILL -> first pull served by the new owner, as P50/P99 over 20 kills.

`make test-scale` runs this directory (and `make test` calls it); docs/status.md keeps
its measured run time.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import signal
import statistics
import subprocess
import sys
import time

import pytest

from qim.cluster import placement
from qim.proto.v1 import connection_pb2
from qim.protocol import Opcode
from tests.e2e.rawclient import RawClient, first_pull_after
from tests.fixtures import TEST_SHARD_COUNT
from tests.scale.harness import (
    LEASE_MS,
    RENEW_MS,
    SPARE,
    Load,
    blocking,
    epochs,
    freeze_all,
    metric,
    node_id,
    owners,
    scale_stack,
    sdk_base_on,
    settled,
    shard_of,
    until_owned_by,
    user_on,
)

KILLS = 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, shared_cassandra):
    with scale_stack(tmp_path_factory.mktemp("scale"), shared_cassandra) as st:
        yield st


def gw_sum(st, metric_name: str) -> float:
    return sum(metric(st, n, metric_name) for n in st.names if n.startswith("gateway") and st.alive(n))


def mailbox_sum(st, metric_name: str) -> float:
    return sum(metric(st, n, metric_name) for n in st.names if n.startswith("mailbox") and st.alive(n))


async def test_two_of_every_kind_share_the_shards_and_qimctl_shows_owners_and_epochs(cluster):
    st = cluster
    await settled(st)
    env = {**os.environ, **st.env}
    out = await blocking(functools.partial(subprocess.run, [sys.executable, "-m", "qim.cli.qimctl", "shards"],
                                           env=env, capture_output=True, text=True, timeout=60))
    assert out.returncode == 0, out.stderr
    for name in ("mailbox", "mailbox2", "session", "session2", "fanout", "fanout2", "archiver", "archiver2",
                 "gateway", "gateway2"):
        assert f"node {node_id(st, name)}" in out.stdout, (name, out.stdout)
    assert "unowned" not in out.stdout, out.stdout
    assert all(e >= 1 for e in (await epochs(st, "mailbox")).values())
    assert len(st.engines.kafkas) == 3


async def next_push(client: RawClient, deadline: float) -> None:
    """Return at the client's next PUSH_EVENTS: one a request already set aside while it
    waited for its reply (RawClient.pushes) counts, or the push would be missed."""
    while not client.pushes:
        item = await asyncio.wait_for(client.stream.read_frame(), max(0.1, deadline - time.monotonic()))
        assert item is not None, "connection closed"
        if item[0] == Opcode.PUSH_EVENTS:
            return
    client.pushes.pop(0)


async def test_a_recipient_on_the_other_gateway_gets_every_message_by_push(cluster):
    st = cluster
    await settled(st)
    gw1, gw2 = st.gateway_addrs[:2]
    a = random.getrandbits(40) + 1
    b = random.getrandbits(40) + 1
    while shard_of(b) == shard_of(a):  # one record per shard: a's and b's go out apart
        b = random.getrandbits(40) + 1
    sender = await RawClient.login(st, a, device=1, addr=gw1)
    phone = await RawClient.login(st, b, device=1, addr=gw2)
    _, cursor = await phone.pull_all()
    await asyncio.sleep(1.5)  # presence reaches the owners of a's and b's shards
    count0, sum0 = (mailbox_sum(st, "qim_mailbox_push_gateways_count"),
                    mailbox_sum(st, "qim_mailbox_push_gateways_sum"))
    got: list[bytes] = []
    want = [b"push %d" % i for i in range(10)]
    for body in want:
        op, _ = await sender.send_text(b, body)
        assert op == Opcode.SEND_ACK
        deadline = time.monotonic() + 10
        while body not in got:  # pulls only when a push came
            await next_push(phone, deadline)
            entries, cursor = await phone.pull_all(cursor)
            got += [e.body for e in entries]
    assert got == want
    await asyncio.sleep(0.5)
    records = mailbox_sum(st, "qim_mailbox_push_gateways_count") - count0
    pushes = mailbox_sum(st, "qim_mailbox_push_gateways_sum") - sum0
    # a's record to gw1 (a's device), b's to gw2: one push per record, each to its holding gateway
    assert records >= 20 and pushes == records, (records, pushes)
    # b with a second device on gw1: b's records now go to both gateways
    laptop = await RawClient.login(st, b, device=2, addr=gw1)
    await asyncio.sleep(1.5)
    count0, sum0 = (mailbox_sum(st, "qim_mailbox_push_gateways_count"),
                    mailbox_sum(st, "qim_mailbox_push_gateways_sum"))
    op, _ = await sender.send_text(b, b"to both")
    assert op == Opcode.SEND_ACK
    entries = []
    deadline = time.monotonic() + 10
    while b"to both" not in [e.body for e in entries]:
        await next_push(laptop, deadline)
        entries, _ = await laptop.pull_all(cursor)
    await asyncio.sleep(0.5)
    records = mailbox_sum(st, "qim_mailbox_push_gateways_count") - count0
    pushes = mailbox_sum(st, "qim_mailbox_push_gateways_sum") - sum0
    assert (records, pushes) == (2, 3), (records, pushes)  # a's to gw1; b's to gw1 and gw2
    for c in (sender, phone, laptop):
        await c.close()


async def test_a_duplicate_login_on_the_other_gateway_kicks_exactly_the_old_connection_once(cluster):
    st = cluster
    await settled(st)
    gw1, gw2 = st.gateway_addrs[:2]
    user, device = random.getrandbits(40) + 1, random.getrandbits(31) + 1
    remote0, local0 = gw_sum(st, "qim_gateway_remote_kicks_total"), gw_sum(st, "qim_gateway_kicks_total")
    old = await RawClient.login(st, user, device, addr=gw1)
    await asyncio.sleep(1.5)
    new = await RawClient.login(st, user, device, addr=gw2)
    frames = []
    while True:  # the old connection: KICKED{REPLACED}, then closed
        item = await asyncio.wait_for(old.stream.read_frame(), 20)
        if item is None:
            break
        frames.append(item[0])
    assert frames.count(Opcode.KICKED) == 1, frames
    # the new one stays: nothing but pushes for some seconds, then a pull is served
    await asyncio.sleep(3)
    op, _ = await new.request(Opcode.PING, connection_pb2.Ping(client_time_ms=1).SerializeToString())
    assert op == Opcode.PONG
    assert Opcode.KICKED not in [p[0] for p in new.pushes]
    assert gw_sum(st, "qim_gateway_remote_kicks_total") - remote0 == 1
    assert gw_sum(st, "qim_gateway_kicks_total") - local0 == 0
    await new.close()


async def test_a_killed_mailbox_node(cluster):
    st = cluster
    table = await until_owned_by(st, "mailbox", ("mailbox", "mailbox2"))
    victim = node_id(st, "mailbox")
    load = await Load(st, [(user_on(victim, table), user_on(victim, table)),
                           (random.getrandbits(40) + 1, user_on(victim, table))],
                      sdk_users=sdk_base_on(victim, table)).start()
    await blocking(st.kill_service, "mailbox")
    took = await first_pull_after(st, user_on(victim, table), time.monotonic(), st.gateway_addrs[1])
    assert took <= (LEASE_MS + 2 * RENEW_MS) / 1000 + 3, took
    await asyncio.sleep(2)
    await blocking(st.start_service, "mailbox")
    await settled(st)
    await load.check()


async def test_a_mailbox_owner_paused_past_its_lease(cluster):
    st = cluster
    table = await until_owned_by(st, "mailbox", ("mailbox", "mailbox2"))
    paused = node_id(st, "mailbox2")
    load = await Load(st, [(random.getrandbits(40) + 1, user_on(paused, table)),
                           (user_on(paused, table), user_on(paused, table))],
                      sdk_users=sdk_base_on(paused, table)).start()
    lost0 = metric(st, "mailbox2", "qim_shard_lost_total")
    pid = st.pids["mailbox2"]
    os.kill(pid, signal.SIGSTOP)
    try:
        await until_owned_by(st, "mailbox", ("mailbox",), timeout=30)
        await asyncio.sleep(1)
    finally:
        os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + 20
    while metric(st, "mailbox2", "qim_shard_lost_total") <= lost0:  # it noticed, counted and stopped
        assert time.monotonic() < deadline, "the resumed owner never reported its lost shards"
        await asyncio.sleep(0.2)
    await settled(st)  # handed back by release, new epochs
    await load.check()
    assert metric(st, "mailbox", "qim_mailbox_dirty_total") == 0
    assert metric(st, "mailbox2", "qim_mailbox_dirty_total") == 0


async def test_a_killed_session_node(cluster):
    st = cluster
    table = await until_owned_by(st, "session", ("session", "session2"))
    victim = node_id(st, "session2")
    load = await Load(st, [(random.getrandbits(40) + 1, random.getrandbits(40) + 1)],
                      sdk_users=sdk_base_on(victim, table)).start()
    await asyncio.sleep(1)
    await blocking(st.kill_service, "session2")
    await until_owned_by(st, "session", ("session",), timeout=30)
    await asyncio.sleep(2)
    await blocking(st.start_service, "session2")
    await settled(st)
    await load.check()  # the lane's unread check: every list exact after the takeover


async def test_a_killed_fanout_coordinator(cluster):
    st = cluster
    await until_owned_by(st, "fanout", ("fanout", "fanout2"))
    load = await Load(st, [(random.getrandbits(40) + 1, random.getrandbits(40) + 1) for _ in range(3)]).start()
    await asyncio.sleep(1)
    await blocking(st.kill_service, "fanout2")
    await until_owned_by(st, "fanout", ("fanout",), timeout=30)
    await asyncio.sleep(2)
    await blocking(st.start_service, "fanout2")
    await settled(st)
    await load.check()


async def test_a_killed_gateway(cluster):
    st = cluster
    await settled(st)
    load = await Load(st, [(random.getrandbits(40) + 1, random.getrandbits(40) + 1) for _ in range(4)]).start()
    await asyncio.sleep(1)
    await blocking(st.kill_service, "gateway2")  # its clients reconnect (jittered) once it is back
    await asyncio.sleep(4)
    await blocking(st.start_service, "gateway2")
    await settled(st)
    await load.check()


async def test_a_node_added_under_traffic_and_removed(cluster):
    st = cluster
    await settled(st)
    before = await epochs(st, "mailbox")
    load = await Load(st, [(random.getrandbits(40) + 1, random.getrandbits(40) + 1) for _ in range(3)]).start()
    for name in SPARE:
        await blocking(st.start_service, name)
    await blocking(st.wait_ready, list(SPARE))
    await until_owned_by(st, "mailbox", ("mailbox", "mailbox2", "mailbox3"))
    await until_owned_by(st, "session", ("session", "session2", "session3"))
    # the handover ends at exactly the deterministic rule over the three live ids
    # (qim/cluster/placement.py); every shard owned by the three is only a step of it
    want = placement.table("mailbox", TEST_SHARD_COUNT, [node_id(st, n) for n in ("mailbox", "mailbox2", "mailbox3")])
    deadline = time.monotonic() + 30
    while (table := await owners(st, "mailbox")) != want:
        assert time.monotonic() < deadline, (table, want)
        await asyncio.sleep(0.2)
    after = await epochs(st, "mailbox")
    taken = {s for s, n in table.items() if n == node_id(st, "mailbox3")}
    assert taken and all(after[s] > before[s] for s in taken)  # each handed over: a new owner_epoch
    loads = sorted(list(table.values()).count(n) for n in set(table.values()))
    assert loads[-1] - loads[0] <= 1, table
    await asyncio.sleep(2)
    for name in SPARE:  # removing a node: a clean stop releases its shards at once
        await blocking(st.stop_service, name)
    await until_owned_by(st, "mailbox", ("mailbox", "mailbox2"), timeout=15)
    await until_owned_by(st, "session", ("session", "session2"), timeout=15)
    await load.check()


async def test_takeover_time_over_twenty_kills(cluster):
    st = cluster
    gw = st.gateway_addrs[0]
    await settled(st)
    table = await owners(st, "mailbox")
    load = await Load(st, [(user_on(node_id(st, "mailbox"), table), user_on(node_id(st, "mailbox2"), table)),
                           (user_on(node_id(st, "mailbox2"), table), user_on(node_id(st, "mailbox"), table))],
                      sdk=0).start()
    took = []
    for i in range(KILLS):
        name = ("mailbox", "mailbox2")[i % 2]
        table = await until_owned_by(st, "mailbox", ("mailbox", "mailbox2"))
        probe = user_on(node_id(st, name), table)
        before = (await epochs(st, "mailbox"))[shard_of(probe)]
        killed = time.monotonic()
        await blocking(st.kill_service, name)
        took.append(await first_pull_after(st, probe, killed, gw))
        taken = await epochs(st, "mailbox")
        assert taken[shard_of(probe)] > before  # the survivor serves it under a higher owner_epoch
        await blocking(st.start_service, name)
        await blocking(st.wait_ready, [name])
        await until_owned_by(st, "mailbox", ("mailbox", "mailbox2"))
        assert (await epochs(st, "mailbox"))[shard_of(probe)] >= taken[shard_of(probe)]  # never lower
    await settled(st)
    await load.check()
    took.sort()
    p50, p99 = statistics.median(took), took[min(len(took) - 1, int(0.99 * len(took)))]
    print(f"\ntakeover: SIGKILL -> first pull served by the new owner over {len(took)} kills: "
          f"P50 {p50:.2f} s, P99 {p99:.2f} s, max {took[-1]:.2f} s (lease {LEASE_MS} ms, renewal {RENEW_MS} ms)")
    assert p99 <= (LEASE_MS + 2 * RENEW_MS) / 1000 + 3, took


async def test_the_whole_machine_paused(cluster):
    """Every process stopped at once for longer than a lease and resumed: leases have
    lapsed, every connection and Redis call timed out at once; the stack settles again
    by itself and no app was told anything wrong (the SDK clients, outside the pause,
    see their connections go quiet and reconnect)."""
    st = cluster
    await settled(st)
    load = await Load(st, [(random.getrandbits(40) + 1, random.getrandbits(40) + 1) for _ in range(2)]).start()
    await asyncio.sleep(1)
    leased = [n for n in st.names if st.alive(n) and n.rstrip("23") in ("mailbox", "session", "fanout", "archiver")]
    names = ("qim_shard_lost_total", "qim_node_lease_lapses_total")
    before = {n: sum(metric(st, n, m) for m in names) for n in leased}
    await blocking(freeze_all, st, LEASE_MS / 1000 + 2)
    await settled(st, timeout=60)
    # the pause had an effect: leases lapsed. A node whose renewal comes first after the
    # resume keeps its shards under the same owner_epoch (nobody took them meanwhile), so
    # it may lose none but counts the lapse (in one run no node lost a shard)
    after = {n: sum(metric(st, n, m) for m in names) for n in leased}
    assert sum(after.values()) > sum(before.values()), (before, after)
    await load.check()


async def test_a_killed_broker_last(cluster):
    """Last: the broker stays down (two of three replicas in sync keep acks=all working;
    a KRaft broker's restart under this load took longer than the suite can wait)."""
    st = cluster
    await settled(st)
    load = await Load(st, [(random.getrandbits(40) + 1, random.getrandbits(40) + 1) for _ in range(4)]).start()
    await asyncio.sleep(1)
    st.engines.kafkas[2].kill()
    await asyncio.sleep(8)  # every send acknowledged meanwhile went to the two brokers left
    await load.check()
