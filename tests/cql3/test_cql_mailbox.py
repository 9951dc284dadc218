"""(`make test-cql3`: on the three-node cluster there, out of `make test` for the CI budget.)
The CQL MailboxStore in a running stack (QIM_MAILBOX_STORE=cql; docs/decisions/0102):
writer, fanout, two MailboxNodes, session and gateway on Redis + Kafka + a keyspace of
the shared Cassandra node. Messages sent under traffic are materialized into CQL (no
mailbox key in Redis), a MailboxNode is SIGKILLed and its shards are taken over by the
other under a higher owner_epoch (a second frontier row per moved shard), and every
message reaches its recipient once and in order, through raw pulls and through the SDK.
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import time

import pytest

from qim.stores.cql.session import CqlSession
from tests.e2e.archive import archive_stack, qimctl, redis_client
from tests.e2e.rawclient import first_pull_after
from tests.e2e.sdkclient import client, close_all
from tests.e2e.test_shard_takeover import LEASE_MS, RENEW_MS, Traffic, node_id, owners, until_split, user_on
from tests.sdk.realstack import eventually


@pytest.fixture(scope="module")
def cql_stack(tmp_path_factory, shared_cassandra):
    env = {"QIM_MAILBOX_STORE": "cql", "QIM_SHARD_LEASE_MS": str(LEASE_MS), "QIM_SHARD_RENEW_MS": str(RENEW_MS)}
    with archive_stack(tmp_path_factory.mktemp("cqlmbx"), shared_cassandra, extra_env=env, mailboxes=2) as st:
        st.scylla = shared_cassandra.scylla(st.keyspace)
        yield st


async def frontier_rows(stack, shards) -> dict[int, list[tuple[int, int]]]:
    """shard -> (owner_epoch, frontier_offset) of its frontier rows (highest epoch first),
    read from CQL (`stack.scylla`, `stack.keyspace`)."""
    s = CqlSession(stack.scylla)
    try:
        out = {}
        for shard in shards:
            rows = await s.execute(f"SELECT epoch, frontier_offset FROM {stack.keyspace}.mailbox_shard_frontier "
                                   "WHERE shard = %s", (shard,))
            out[shard] = [(r[0], r[1]) for r in rows]
        return out
    finally:
        await s.close()


async def frontier_epochs(stack, shards) -> dict[int, list[int]]:
    """shard -> the owner_epochs of its frontier rows (highest first), read from CQL."""
    return {shard: [e for e, _ in rows] for shard, rows in (await frontier_rows(stack, shards)).items()}


async def test_cql_mailbox_survives_a_killed_mailbox_node_with_nothing_lost_or_doubled(cql_stack, tmp_path):
    st = cql_stack
    table = await until_split(st, "mailbox", ("mailbox", "mailbox2"))
    victim = node_id(st, "mailbox")
    moved = sorted(s for s, n in table.items() if n == victim)
    pairs = [(random.getrandbits(40) + 1, user_on(victim, table)), (user_on(victim, table), user_on(victim, table)),
             (user_on(victim, table), random.getrandbits(40) + 1)]
    reader = await client(st, tmp_path, pairs[0][1])  # an SDK client connected across the takeover
    try:
        await reader.connect()
        traffic = Traffic(st, pairs)
        await asyncio.sleep(2)
        st.kill_service("mailbox")
        took = await first_pull_after(st, user_on(victim, table), time.monotonic(), timeout=60.0)
        assert set((await owners(st, "mailbox")).values()) == {node_id(st, "mailbox2")}
        await asyncio.sleep(2)  # more traffic on the new owner
        await traffic.stop_and_check()  # raw pulls from a zero cursor: every acknowledged message once, in order

        # read back through the SDK: its store holds every message of the first conversation, in order
        conv = traffic.convs[0]
        want = [conv.acks[b].message_id for b in conv.order]
        got: list = []

        async def all_there() -> bool:
            got[:] = [m.message_id for m in await reader.store.run(reader.store.messages)
                      if m.sender_id == conv.sender]
            return got == want
        try:
            await eventually(all_there, timeout=60, what="every message in the SDK's store, in order")
        except AssertionError:
            raise AssertionError(f"SDK store: {len(got)} of {len(want)} messages, {len(set(got) & set(want))} "
                                 "of them sent") from None
    finally:
        await close_all(reader)

    # the moved shards were fenced by the new owner: a frontier row of a higher owner_epoch
    epochs = await frontier_epochs(st, moved)
    assert all(len(e) >= 2 and e == sorted(e, reverse=True) for e in epochs.values()), epochs
    # materialized into CQL only: no mailbox bucket, index, watermark or DispatchProgress key in Redis
    assert not [k for pattern in ("qim:mbx*", "qim:wm:*", "qim:dp:*")
                for k in redis_client(st).scan_iter(match=pattern, count=1000)]
    # qimctl trace reads the watermark and DispatchProgress from the CQL MailboxStore too
    last = traffic.convs[0].acks[traffic.convs[0].order[-1]]
    trace = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "qim.cli.qimctl", "trace",
                                                     last.message_id.hex()], env={**os.environ, **st.env},
                                    capture_output=True, text=True, timeout=120)
    assert trace.returncode == 0 and "materialized: shard" in trace.stdout, trace.stdout + trace.stderr
    assert "materialized: not yet" not in trace.stdout, trace.stdout
    print(f"cql mailbox takeover: kill -> first pull served {took:.2f} s; {sum(len(c.order) for c in traffic.convs)}"
          " messages, none lost or doubled")


async def test_a_missing_mailbox_table_is_refused_at_start_and_by_schema_check(cql_stack):
    """A mailbox table dropped behind its recorded version: `qimctl schema check` exits 2
    naming it, a mailbox node exits 3 (cannot start) naming it and the fix, and
    `qimctl schema apply` creates it again (then both start and check pass)."""
    st = cql_stack
    st.stop_service("mailbox2")  # its ports and node id are free for the node started by hand
    s = CqlSession(st.scylla)
    try:
        await s.execute(f"DROP TABLE {st.keyspace}.mailbox_dispatch", None, "drop", 120.0)
    finally:
        await s.close()
    check = await asyncio.to_thread(qimctl, st, "schema", "check")
    assert check.returncode == 2, check.stdout + check.stderr
    assert f"keyspace {st.keyspace} has no mailbox table mailbox_dispatch" in check.stderr, check.stderr
    env = {**os.environ, **st.env, **st.instance_env["mailbox2"], "PYTHONUNBUFFERED": "1"}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "qim.app", "mailbox", env=env,
                                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, raw = await asyncio.wait_for(proc.communicate(), timeout=120)
    except asyncio.TimeoutError:
        proc.kill()  # our own child, by its pid
        await proc.wait()
        raise AssertionError("the mailbox node ran for 120 s without its mailbox_dispatch table") from None
    err = raw.decode(errors="replace")
    assert proc.returncode == 3, err
    assert "has no mailbox table mailbox_dispatch: run `qimctl schema apply`" in err, err
    apply = await asyncio.to_thread(qimctl, st, "schema", "apply")
    assert apply.returncode == 0, apply.stdout + apply.stderr
    check = await asyncio.to_thread(qimctl, st, "schema", "check")
    assert check.returncode == 0, check.stdout + check.stderr
    st.start_service("mailbox2")
    await asyncio.to_thread(st.wait_ready, ["mailbox2"])
