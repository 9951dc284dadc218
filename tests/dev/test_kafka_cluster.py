"""The three-broker development cluster (qim/dev/kafka_cluster.py; docs/design.md §13
"Brokers"): one KRaft quorum of three broker+controllers on loopback, each with its own
ports and directory, one cluster id, replication factor 3 and min.insync.replicas 2, no
per-append flush (replication is the durability); recorded in state.json and loaded back
as the same cluster. The engines themselves run in tests/e2e/test_broker_kill.py."""

from __future__ import annotations

import json

from qim.dev.engines import EngineSet
from qim.dev.kafka_cluster import bootstrap_of, cluster_of


def props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_three_brokers_form_one_quorum_with_replication_three(tmp_path):
    ports = [{"main": 20001 + 2 * i, "controller": 20002 + 2 * i} for i in range(3)]
    brokers = cluster_of(tmp_path, ports)
    seen = [props(b._properties()) for b in brokers]
    assert [p["node.id"] for p in seen] == ["1", "2", "3"]
    assert {p["controller.quorum.voters"] for p in seen} == {"1@127.0.0.1:20002,2@127.0.0.1:20004,3@127.0.0.1:20006"}
    assert len({b.cluster_id for b in brokers}) == 1 and len({b.dir for b in brokers}) == 3
    for p in seen:
        assert (p["default.replication.factor"], p["min.insync.replicas"]) == ("3", "2")
        assert (p["offsets.topic.replication.factor"], p["transaction.state.log.min.isr"]) == ("3", "2")
        assert "log.flush.interval.messages" not in p
        assert p["unclean.leader.election.enable"] == "false"
    assert bootstrap_of(brokers) == "127.0.0.1:20001,127.0.0.1:20003,127.0.0.1:20005"
    assert [b.name for b in brokers] == ["kafka1", "kafka2", "kafka3"]


def test_a_recorded_cluster_loads_back_with_every_broker(tmp_path):
    brokers = cluster_of(tmp_path, [{"main": 21001 + 2 * i, "controller": 21002 + 2 * i} for i in range(3)])
    state = {"shard_count": 8, "dir": str(tmp_path), "outbox_partitions": 4,
             "redis": {"name": "redis", "pid": None, "ports": {"main": 21000}, "dir": str(tmp_path / "redis")},
             "kafka": brokers[0].to_state(), "kafka_brokers": [b.to_state() for b in brokers]}
    (tmp_path / "state.json").write_text(json.dumps(state))
    es = EngineSet.load(tmp_path)
    assert es is not None and len(es.kafkas) == 3 and es.outbox_partitions == 4
    assert es.env()["QIM_KAFKA_BOOTSTRAP"] == bootstrap_of(brokers)
    assert [k.node_id for k in es.kafkas] == [1, 2, 3] and es.kafkas[2].voters == brokers[0].voters
    assert [e.name for e in es.engines] == ["redis", "kafka1", "kafka2", "kafka3"]
