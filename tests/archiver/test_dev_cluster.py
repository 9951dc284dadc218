"""The three-node development CQL cluster without starting it (the real one runs in
`make test-cql3`): `qim-dev engines up --cql-nodes 3` is parsed and refused with
--without-cassandra, the nodes get 127.0.0.1-3, one port pair, evenly spaced tokens and
their seeds in cassandra.yaml, the engine set records and reloads every node, and
engines.env names the three nodes without the single-node switch."""

from __future__ import annotations

import pytest

from qim.dev.cassandra_cluster import cluster_nodes
from qim.dev.cli import _parser, main
from qim.dev.engines import EngineSet
from qim.dev.kafka_engine import KafkaEngine
from qim.dev.redis_engine import RedisEngine
from qim.errors import EngineError

PORTS = {"main": 19042, "storage": 19043}


def test_the_cli_takes_1_or_3_nodes_and_refuses_them_without_cassandra(capsys):
    assert _parser().parse_args(["engines", "up", "--cql-nodes", "3"]).cql_nodes == 3
    assert _parser().parse_args(["engines", "up"]).cql_nodes is None
    with pytest.raises(SystemExit):
        _parser().parse_args(["engines", "up", "--cql-nodes", "2"])
    assert main(["engines", "up", "--cql-nodes", "3", "--without-cassandra"]) == 2
    assert "--cql-nodes needs Cassandra" in capsys.readouterr().err


def test_three_nodes_have_their_own_address_token_and_the_same_seeds(tmp_path):
    nodes = cluster_nodes(tmp_path, PORTS, 3)
    assert [n.host for n in nodes] == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    assert [n.addr for n in nodes] == ["127.0.0.1:19042", "127.0.0.2:19042", "127.0.0.3:19042"]
    tokens = [n.initial_token for n in nodes]
    assert tokens == sorted(tokens) and tokens[0] == -2 ** 63
    assert tokens[1] - tokens[0] == tokens[2] - tokens[1] == 2 ** 64 // 3
    yaml = nodes[2]._yaml()
    assert "listen_address: 127.0.0.3" in yaml and "rpc_address: 127.0.0.3" in yaml
    assert 'seeds: "127.0.0.1:19043,127.0.0.2:19043"' in yaml
    assert f"initial_token: {tokens[2]}" in yaml and "hinted_handoff_enabled: true" in yaml
    with pytest.raises(EngineError):
        cluster_nodes(tmp_path, PORTS, 4)


def test_the_engine_set_records_every_node_and_env_names_them_without_the_switch(tmp_path):
    nodes = cluster_nodes(tmp_path / "c", PORTS, 3)
    es = EngineSet(tmp_path, RedisEngine(tmp_path / "r", {"main": 1}), KafkaEngine(tmp_path / "k", {"main": 2,
                   "controller": 3}), 8, cassandras=nodes)
    es.save()
    back = EngineSet.load(tmp_path)
    assert [(c.host, c.ports, c.initial_token, c.seeds) for c in back.cassandras] == [
        (c.host, c.ports, c.initial_token, c.seeds) for c in nodes]
    assert back.cassandra is back.cassandras[0]
    for c in back.cassandras:  # env() names nodes that run: pretend they do
        c.alive = lambda: True
    env = back.env()
    assert env["QIM_SCYLLA_ADDRS"] == "127.0.0.1:19042,127.0.0.2:19042,127.0.0.3:19042"
    assert "QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV" not in env
    with pytest.raises(EngineError, match="3 Cassandra node"):
        EngineSet.up(tmp_path, 8, with_cassandra=True, cql_nodes=1)
