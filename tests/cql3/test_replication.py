"""Replication and consistency of the archive tier on the three-node cluster (`make
test-cql3`; docs/design.md §8, docs/decisions/0089): keyspaces are created RF 3
(NetworkTopologyStrategy in the local DC), a keyspace with fewer replicas than the
cluster has nodes is refused with or without QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV, and
reads and writes are LOCAL_QUORUM: one node frozen, they go on; two frozen, they are
refused with a typed error (at ONE they would be accepted by the one live replica)."""

from __future__ import annotations

import dataclasses
import secrets

import pytest

from qim.dev.cassandra_cluster import pause, resume
from qim.errors import EngineError
from qim.proto.v1 import message_pb2
from qim.stores.archive import ArchiveRecord
from qim.stores.cql.backend import CqlBackend
from qim.stores.cql.session import DDL_TIMEOUT_S
from qim.stores.errors import StoreUnavailable
from tests.e2e.archive import drop_keyspace
from tests.sdk.realstack import eventually


@pytest.fixture
async def backend(shared_cassandra):
    assert len(shared_cassandra.nodes) == 3, "run through `make test-cql3` (QIM_TEST_CQL_NODES=3)"
    keyspace = f"qim_rf_{secrets.token_hex(4)}"
    b = CqlBackend(shared_cassandra.scylla(keyspace))
    yield b
    await b.close()
    await eventually(lambda: dropped(shared_cassandra, keyspace), 120, f"DROP KEYSPACE {keyspace}")


def dropped(cluster, keyspace: str) -> bool:
    """Drop `keyspace`; False when the cluster did not answer (a node just resumed)."""
    try:
        drop_keyspace(cluster, keyspace)
    except StoreUnavailable:
        return False
    return True


async def replication_of(b: CqlBackend) -> dict:
    rows = await b.session.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
                                   (b.session.keyspace,))
    return dict(rows[0][0])


async def test_apply_creates_rf3_even_with_the_development_switch(backend, shared_cassandra):
    await backend.apply_schema()
    repl = await replication_of(backend)
    assert repl["class"].endswith("NetworkTopologyStrategy") and repl["datacenter1"] == "3"
    await backend.check()
    dev = CqlBackend(dataclasses.replace(backend.session.cfg, keyspace=backend.session.keyspace + "d",
                                         allow_single_node_dev=True))
    try:
        await dev.apply_schema()  # the switch on a cluster of three: still RF 3
        repl = await replication_of(dev)
        assert repl["class"].endswith("NetworkTopologyStrategy") and repl["datacenter1"] == "3"
    finally:
        await dev.close()
        drop_keyspace(shared_cassandra, backend.session.keyspace + "d")


@pytest.mark.parametrize("switch", [False, True])
async def test_an_rf1_keyspace_on_three_nodes_is_refused(backend, switch):
    ks = backend.session.keyspace
    await backend.session.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                                  "{'class': 'SimpleStrategy', 'replication_factor': 1}", None, "create",
                                  DDL_TIMEOUT_S)
    b = CqlBackend(dataclasses.replace(backend.session.cfg, allow_single_node_dev=switch))
    try:
        for step in (b.apply_schema, b.check):
            with pytest.raises(EngineError) as err:
                await step()
            assert "replica" in str(err.value) and ks in str(err.value)
            if switch:
                assert "cluster of 3 nodes" in str(err.value)
    finally:
        await b.close()


def record(n: int) -> ArchiveRecord:
    rec = message_pb2.MessageRecord(tenant_id=bytes(16), message_id=secrets.token_bytes(16),
                                    conversation_id=b"c" * 16, conversation_seq=n, sender_id=1,
                                    sender_device_id=1, client_message_id=secrets.token_bytes(16),
                                    message_type=1, body=b"x%d" % n, created_at_ms=1_700_000_000_000 + n)
    return ArchiveRecord(rec, 86400)


async def test_local_quorum_one_node_frozen_goes_on_two_are_refused(backend, shared_cassandra):
    await backend.apply_schema()
    # every statement prepared before a node freezes (a PREPARE is not retried elsewhere)
    await backend.archive.write(0, [record(0)], [])
    assert len(await backend.archive.records(0, [b"0" * 16])) == 1
    await backend.archive.archived(0, b"c" * 16, 0, 1)
    n1, n2, n3 = shared_cassandra.nodes
    pause(n3)
    try:
        # 12 records, each its own partition: the driver picks each coordinator among the
        # three replicas, so the frozen node coordinates some (speculative retry: 0090)
        written = [record(n) for n in range(1, 13)]
        await backend.archive.write(0, written, [])
        read = await backend.archive.records(0, [w.record.message_id for w in written])
        assert read == [w.record for w in written]
        assert sorted(await backend.archive.archived(0, b"c" * 16, 0, 12)) == list(range(1, 13))
    finally:
        resume(n3)
    pause(n2)
    pause(n3)
    try:
        with pytest.raises(StoreUnavailable):  # one live replica of three: no quorum
            await backend.archive.write(0, [record(13)], [])
    finally:
        resume(n2)
        resume(n3)
