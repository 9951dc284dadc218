"""A three-node Cassandra cluster for the tests of the RF 3 gate (`make test-cql3`):
shared_cassandra (tests/fixtures.py) starts it instead of one node when
QIM_TEST_CQL_NODES=3 (qim/dev/cassandra_cluster.py: nodes on 127.0.0.1-3, one port each).

QIM_TEST_CQL_NODES_STATE=<file> (development) uses a running cluster instead: the file
holds the JSON list of its nodes' `CassandraEngine.to_state()`; the tests still kill,
pause and restart its nodes, by their recorded pids, and leave them running."""

from __future__ import annotations

import concurrent.futures
import json
import os

import pytest

from qim.dev._proc import pick_ports
from qim.dev.cassandra_cluster import cluster_nodes, start_nodes, wait_cluster_ready
from qim.dev.cassandra_engine import CassandraEngine, ensure_cassandra_jars
from qim.errors import EngineError

# three JVMs starting one after the other on a loaded 2-core machine
CLUSTER_START_TIMEOUT_S = 900.0


def shared_cluster(base, count: str):
    """Generator of the shared_cassandra fixture for a cluster of `count` nodes ("3"):
    yields a SharedCassandra naming every node; stops each node by its pid afterwards.
    FAILS the session's CQL tests (never skips) when it cannot start."""
    from tests.fixtures import SharedCassandra

    if count != "3":
        pytest.fail(f"QIM_TEST_CQL_NODES must be 1 or 3, got {count!r}", pytrace=False)
    state = os.environ.get("QIM_TEST_CQL_NODES_STATE", "")
    if state:
        nodes = [CassandraEngine.from_state(n) for n in json.loads(open(state).read())]
        for node in nodes:
            node.lib = ensure_cassandra_jars()
        wait_cluster_ready(nodes, CLUSTER_START_TIMEOUT_S)
        yield SharedCassandra(",".join(n.addr for n in nodes), nodes[0], nodes)
        return
    main, storage = pick_ports(2)
    nodes = cluster_nodes(base, {"main": main, "storage": storage}, 3)
    lib = ensure_cassandra_jars()
    for node in nodes:
        node.lib, node.die_with_parent = lib, True
    try:
        start_nodes(nodes, CLUSTER_START_TIMEOUT_S)
    except EngineError as exc:
        for node in nodes:
            node.kill()
        pytest.fail(f"cassandra cluster could not start: {exc}", pytrace=False)
    yield SharedCassandra(",".join(n.addr for n in nodes), nodes[0], nodes)
    # the three drain at once (each stop SIGTERMs its JVM and waits for its clean exit,
    # raising otherwise): one after the other they were ~20 s of `make test-cql3`'s end
    with concurrent.futures.ThreadPoolExecutor(len(nodes)) as pool:
        list(pool.map(lambda node: node.stop(), nodes))
