"""Cassandra 5.0 dev engine (the local stand-in for ScyllaDB, docs/design.md §8).

A real node from Maven Central jars, on its own ports under a tmp dir: the CQL shapes
the HistoryArchiver will use (u128 as a 16-byte blob, u64 as a bigint with bit 63
clear) survive a graceful and a crash restart, and the engine is stopped by its pid.
"""

from __future__ import annotations

import os

import psutil
import pytest

from qim.dev._proc import pid_alive
from qim.dev.cassandra_engine import CassandraEngine
from qim.dev.engines import EngineSet, cassandra_wanted
from qim.errors import EngineError

U63_MAX = (1 << 63) - 1


def _session(eng):
    cluster = eng.cluster()
    return cluster, cluster.connect()


def test_keyspace_table_row_survive_restarts_then_stop_by_pid(private_cassandra):
    eng = private_cassandra
    # QIM_CASSANDRA_JVM_OPTS reaches the node's JVM (tests/conftest.py sets C1 for the
    # session; a developer's `QIM_CASSANDRA_JVM_OPTS=` runs C2 and has nothing to check here)
    extra = os.environ.get("QIM_CASSANDRA_JVM_OPTS", "").split()
    assert set(extra) <= set(psutil.Process(eng.pid).cmdline())
    cluster, s = _session(eng)
    try:
        s.execute("CREATE KEYSPACE qim_test WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE qim_test.messages (message_id blob PRIMARY KEY, "
                  "conversation_seq bigint, body blob)")
        mid, seq, body = os.urandom(16), U63_MAX, b"\x00hello\xff"
        s.execute("INSERT INTO qim_test.messages (message_id, conversation_seq, body) "
                  "VALUES (%s, %s, %s)", (mid, seq, body))
        row = s.execute("SELECT * FROM qim_test.messages WHERE message_id = %s", (mid,)).one()
        assert (row.message_id, row.conversation_seq, row.body) == (mid, seq, body)
    finally:
        cluster.shutdown()

    ports, first = dict(eng.ports), eng.pid
    for hard in (False, True):  # SIGTERM, then SIGKILL (commitlog_sync: batch)
        old = eng.pid
        eng.restart(hard=hard)
        assert eng.ports == ports and eng.pid != old and not pid_alive(old)
        cluster, s = _session(eng)
        try:
            row = s.execute("SELECT conversation_seq, body FROM qim_test.messages "
                            "WHERE message_id = %s", (mid,)).one()
            assert row is not None and (row.conversation_seq, row.body) == (seq, body)
        finally:
            cluster.shutdown()

    pid = eng.pid
    assert pid != first and eng.alive()
    eng.stop()
    assert not pid_alive(pid) and eng.pid is None


def test_extra_jvm_options_come_after_ours_so_they_win(tmp_path, monkeypatch):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "jamm-0.4.0.jar").write_bytes(b"")
    eng = CassandraEngine(tmp_path / "node", {"main": 1, "storage": 2}, lib=lib)
    monkeypatch.delenv("QIM_CASSANDRA_HEAP_MB", raising=False)
    monkeypatch.setenv("QIM_CASSANDRA_JVM_OPTS", "-XX:TieredStopAtLevel=1  -Xmx700m")
    cmd = eng._command()
    assert cmd[cmd.index("-cp") - 2:cmd.index("-cp")] == ["-XX:TieredStopAtLevel=1", "-Xmx700m"]
    assert cmd.index("-Xmx512m") < cmd.index("-Xmx700m")  # the JVM takes the last -Xmx
    monkeypatch.setenv("QIM_CASSANDRA_JVM_OPTS", "")
    assert not any(a.startswith("-XX:TieredStopAtLevel") or a == "-Xmx700m" for a in eng._command())


def test_engine_set_starts_cassandra_only_when_asked(tmp_path, monkeypatch):
    monkeypatch.setenv("QIM_DEV_WITH_CASSANDRA", "1")
    assert cassandra_wanted()
    es = EngineSet.up(tmp_path / "e", 2, die_with_parent=True)
    try:
        env = es.env()
        assert env["QIM_SCYLLA_ADDRS"] == es.cassandra.addr
        assert env["QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV"] == "1"
        assert "QIM_SCYLLA_ADDRS=" in es.env_path.read_text()
        assert es.cassandra.healthy()
        pids = [e.pid for e in es.engines]
        assert len(pids) == 3 and all(pid_alive(p) for p in pids)
        ports = [p for e in es.engines for p in e.ports.values()]
        assert len(set(ports)) == len(ports)
        # not asked again: the running node is left alone, still recorded
        monkeypatch.setenv("QIM_DEV_WITH_CASSANDRA", "0")
        again = EngineSet.up(tmp_path / "e")
        assert again.cassandra is not None and again.cassandra.pid == es.cassandra.pid
    finally:
        es.down(timeout=10)
    assert not any(pid_alive(p) for p in pids)


def test_with_cassandra_flag_must_be_0_or_1(monkeypatch):
    monkeypatch.setenv("QIM_DEV_WITH_CASSANDRA", "yes")
    with pytest.raises(EngineError, match="QIM_DEV_WITH_CASSANDRA must be 0 or 1"):
        cassandra_wanted()
