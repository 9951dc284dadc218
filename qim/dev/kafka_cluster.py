"""A three-broker KRaft cluster of KafkaEngines (qim/dev/kafka_engine.py; docs/design.md §13
"Brokers"): each broker is also a controller of one quorum, all on loopback with their
own ports and directories, sharing one cluster id. Topics get replication factor 3 and
min.insync.replicas 2 (`create_topics(..., replicas=3)`); producers use acks=all.
"""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

from qim.dev.kafka_engine import KafkaEngine, _random_cluster_id


def cluster_of(dir: Path, ports: list[dict[str, int]]) -> list[KafkaEngine]:
    """Engines of one KRaft cluster, broker i+1 in `dir/kafka{i+1}` on `ports[i]`
    ({"main", "controller"}), sharing a cluster id and the controller quorum."""
    voters = ",".join(f"{i + 1}@127.0.0.1:{p['controller']}" for i, p in enumerate(ports))
    cluster_id = _random_cluster_id()
    return [KafkaEngine(Path(dir) / f"kafka{i + 1}", p, node_id=i + 1, voters=voters, cluster_id=cluster_id,
                        brokers=len(ports)) for i, p in enumerate(ports)]


def start_engines(engines: list[KafkaEngine], timeout: float | None = None) -> None:
    """Start (or wait for) every broker of a cluster at once: none is ready before two of
    three controllers vote. EngineError naming the first broker that failed (the others
    that started are left running, for `down`)."""
    if len(engines) <= 1:
        for engine in engines:
            engine.start(timeout)
        return
    with concurrent.futures.ThreadPoolExecutor(len(engines)) as pool:
        futures = [pool.submit(engine.start, timeout) for engine in engines]
        errors = [f.exception() for f in futures]
    for err in errors:
        if err is not None:
            raise err


def bootstrap_of(engines: list[KafkaEngine]) -> str:
    """The bootstrap list "127.0.0.1:P1,127.0.0.1:P2,..." of a cluster."""
    return ",".join(e.addr for e in engines)
