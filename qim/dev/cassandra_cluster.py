"""A development Cassandra cluster of three nodes (docs/design.md §8: the production gate
is three nodes, RF 3, LOCAL_QUORUM), built from CassandraEngines (qim/dev/cassandra_engine.py).

Node i (1..n) listens on its own loopback address 127.0.0.i, every node on the SAME CQL
and storage ports, in `dir/cassandra{i}` (data, commit log, hints). One address per node
with one port for all is how ScyllaDB runs (it cannot share an address between nodes) and
what QIM_SCYLLA_ADDRS expects (one port for every contact point); Linux routes all of
127.0.0.0/8 to the loopback interface. Tokens are fixed and evenly spaced, so no node
bootstraps; nodes 1 and 2 are the seeds. Nodes start one after the other (a node joins
through a seed that already runs), and the cluster is ready when every node answers CQL
and its gossip has heard from every node since that node's last start
(`wait_cluster_ready`; `system.peers` alone says nothing of liveness).

Heaps stay at QIM_CASSANDRA_HEAP_MB (512 MiB) with the single node's small request
pools: three nodes (~1 GiB RSS each) fit a 2-core / 24 GiB machine beside Kafka and Redis.
Each node is stopped by its own pid (`Engine.stop`/`kill`); SIGSTOP/SIGCONT of one node
(`pause`/`resume`) is a node that stops answering without closing its connections.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from qim.dev.cassandra_engine import CassandraEngine
from qim.errors import EngineError

MAX_NODES = 3
_TOKEN_SPAN = 2 ** 64


def node_host(i: int) -> str:
    """The loopback address of node `i` (1-based): 127.0.0.i."""
    return f"127.0.0.{i}"


def cluster_nodes(dir: Path, ports: dict[str, int], n: int) -> list[CassandraEngine]:
    """The `n` engines (1..3) of one cluster under `dir`, sharing `ports`
    ({"main": CQL, "storage": internode}); EngineError for another count."""
    if not 1 <= n <= MAX_NODES:
        raise EngineError(f"a development CQL cluster has 1 to {MAX_NODES} nodes, not {n}")
    seeds = tuple(node_host(i + 1) for i in range(min(n, 2)))
    # Murmur3 tokens span [-2**63, 2**63): node i owns an equal third
    return [CassandraEngine(Path(dir) / f"cassandra{i + 1}", ports, host=node_host(i + 1), seeds=seeds,
                            initial_token=-2 ** 63 + i * (_TOKEN_SPAN // n), cluster_size=n)
            for i in range(n)]


def start_nodes(nodes: list[CassandraEngine], timeout: float | None = None) -> None:
    """Start every node that is not healthy, one after the other, then wait until each
    has heard from all the others (`wait_cluster_ready`). EngineError naming the node that failed
    (nodes started so far are left running, for `down`)."""
    for node in nodes:
        if node.healthy():
            continue
        if node.alive():
            node.wait_ready(timeout or node.start_timeout)
        else:
            node.start(timeout)
    wait_cluster_ready(nodes, timeout or nodes[0].start_timeout)


def gossip_view(node: CassandraEngine) -> dict[str, tuple[int, str]]:
    """What `node`'s gossip holds of every node: address -> (generation, status), from
    the system_views.gossip_info virtual table (Cassandra 4.1+). A node's generation
    changes at each start, so a peer that shows a node's current generation has heard
    from it since that start."""
    cluster = node.cluster()
    try:
        rows = cluster.connect().execute("SELECT address, generation, status_with_port FROM system_views.gossip_info")
        return {str(r.address): (int(r.generation or 0), r.status_with_port or "") for r in rows}
    finally:
        cluster.shutdown()


def wait_cluster_ready(nodes: list[CassandraEngine], timeout: float) -> None:
    """Poll until every node answers CQL and its gossip holds every node NORMAL at that
    node's current generation (it has heard from each since its last start). EngineError
    after `timeout` s naming what was still missing."""
    want = {n.host for n in nodes}
    deadline = time.monotonic() + timeout
    while True:
        missing: dict[str, object] = {}
        views: dict[str, dict[str, tuple[int, str]]] = {}
        for node in nodes:
            try:
                views[node.host] = gossip_view(node)
            except Exception as exc:  # noqa: BLE001 - "not yet" until the deadline
                missing[node.host] = exc
        if not missing:
            current = {h: views[h].get(h, (0, ""))[0] for h in want}
            for host, view in views.items():
                stale = sorted(h for h in want if h not in view or view[h][0] != current[h]
                               or not view[h][1].startswith("NORMAL"))
                if stale:
                    missing[host] = f"has not heard from {stale}"
        if not missing:
            return
        if time.monotonic() > deadline:
            raise EngineError(f"cassandra cluster not ready within {timeout:.0f}s: {missing}")
        time.sleep(1.0)


def pause(node: CassandraEngine) -> None:
    """SIGSTOP the node's JVM: it keeps its sockets but answers nothing (a frozen node)."""
    if node.pid is None or not node.alive():
        raise EngineError(f"cassandra {node.host} is not running")
    os.kill(node.pid, signal.SIGSTOP)


def resume(node: CassandraEngine) -> None:
    """SIGCONT a node paused by `pause`."""
    if node.pid is None:
        raise EngineError(f"cassandra {node.host} is not running")
    os.kill(node.pid, signal.SIGCONT)
