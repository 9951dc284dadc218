"""Real-engine tests of the development engine manager (qim/dev).

No mocks: every test talks to a real redis-server or Kafka broker started by
qim.dev, on its own ports under a tmp dir.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest
import redis
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource

from qim.consts import DISPATCH_TOPIC, KAFKA_MAX_RECORD_BYTES, OUTBOX_TOPIC, PRESENCE_TOPIC
from qim.dev import redis_engine
from qim.dev._proc import pid_alive
from qim.dev.engines import EngineSet
from qim.dev.kafka_engine import KafkaEngine, admin_client
from qim.dev.redis_engine import start_redis
from qim.errors import EngineError
from tests.fixtures import TEST_SHARD_COUNT


def _cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qim.dev.cli", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_env_shape(engines):
    env = engines.env()
    assert env == {"QIM_REDIS_ADDR": engines.redis_addr,
                   "QIM_KAFKA_BOOTSTRAP": engines.kafka_bootstrap,
                   "QIM_MAILBOX_SHARD_COUNT": str(TEST_SHARD_COUNT)}
    assert engines.redis_addr.startswith("127.0.0.1:")
    assert engines.redis_addr.split(":")[1] != "6379"
    assert engines.kafka_bootstrap.split(":")[1] != "9092"
    lines = engines.env_path.read_text().splitlines()
    assert lines == [f"{k}={v}" for k, v in env.items()]


def test_redis_answers_with_durable_config(engines):
    r = engines.redis.client(decode_responses=True)
    assert r.ping()
    assert r.config_get("appendonly") == {"appendonly": "yes"}
    assert r.config_get("appendfsync") == {"appendfsync": "always"}
    assert r.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    assert r.config_get("no-appendfsync-on-rewrite") == {"no-appendfsync-on-rewrite": "no"}
    assert r.config_get("save") == {"save": ""}
    assert r.info("server")["redis_version"] >= "7.0"
    r.close()


def test_kafka_topics_and_limits(engines):
    admin = admin_client(engines.kafka_bootstrap)
    md = admin.list_topics(timeout=10)
    assert len(md.topics[OUTBOX_TOPIC].partitions) == 1
    assert len(md.topics[DISPATCH_TOPIC].partitions) == TEST_SHARD_COUNT
    assert len(md.topics[PRESENCE_TOPIC].partitions) == TEST_SHARD_COUNT  # partition = MailboxShard
    res = [ConfigResource("topic", t) for t in (OUTBOX_TOPIC, DISPATCH_TOPIC, PRESENCE_TOPIC)]
    for resource, fut in admin.describe_configs(res).items():
        cfg = fut.result(timeout=10)
        assert cfg["max.message.bytes"].value == str(KAFKA_MAX_RECORD_BYTES)
        assert cfg["cleanup.policy"].value == ("compact" if resource.name == PRESENCE_TOPIC else "delete")
    broker = admin.describe_configs([ConfigResource("broker", "1")])
    cfg = next(iter(broker.values())).result(timeout=10)
    assert cfg["message.max.bytes"].value == str(KAFKA_MAX_RECORD_BYTES)
    assert cfg["replica.fetch.max.bytes"].value == str(KAFKA_MAX_RECORD_BYTES)


def test_two_mib_record_roundtrip(private_kafka):
    # A broker of its own: a foreign record in the shared qim.dispatch would (rightly)
    # stop the mailbox of the e2e stack.
    bootstrap = private_kafka.bootstrap
    payload = os.urandom(2 * 1024 * 1024 + 17)  # random: compression cannot shrink it
    key = uuid.uuid4().bytes
    delivered = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                  "enable.idempotence": True, "message.max.bytes": KAFKA_MAX_RECORD_BYTES})
    p.produce(DISPATCH_TOPIC, payload, key=key, partition=3,
              on_delivery=lambda err, msg: delivered.append((err, msg)))
    assert p.flush(30) == 0
    (err, msg), = delivered
    assert err is None, err
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "t-roundtrip",
                  "enable.auto.commit": False,
                  "max.partition.fetch.bytes": KAFKA_MAX_RECORD_BYTES,
                  "fetch.max.bytes": 2 * KAFKA_MAX_RECORD_BYTES,
                  "receive.message.max.bytes": 2 * KAFKA_MAX_RECORD_BYTES + 65536})
    # static assign, as the services do (docs/design.md §8): no group rebalancing
    c.assign([TopicPartition(DISPATCH_TOPIC, 3, msg.offset())])
    got = c.poll(30)
    c.close()
    assert got is not None and got.error() is None
    assert got.key() == key
    assert got.value() == payload


def test_redis_restart_keeps_aof_key(private_redis):
    r = private_redis.client()
    r.set("qim:test:k", b"v1")
    r.close()
    port, old_pid = private_redis.port, private_redis.pid
    private_redis.restart(hard=True)  # SIGKILL: only the fsynced AOF survives
    assert private_redis.port == port and private_redis.pid != old_pid
    assert not pid_alive(old_pid)
    r = private_redis.client()
    assert r.get("qim:test:k") == b"v1"
    r.close()
    assert (private_redis.dir / "appendonlydir").is_dir()


def test_start_failure_raises_with_log_tail(tmp_path, monkeypatch):
    monkeypatch.setitem(redis_engine.REDIS_SETTINGS, "no-such-directive", "1")
    with pytest.raises(EngineError) as ei:
        start_redis(tmp_path / "bad")
    msg = str(ei.value)
    assert "exited during start-up" in msg
    assert "no-such-directive" in msg  # Redis's own complaint, from the log tail


def test_cli_rejects_bad_shard_count(tmp_path):
    r = _cli("engines", "up", "--dir", str(tmp_path / "e"), "--shard-count", "3")
    assert r.returncode == 2
    assert "qim-dev: error:" in r.stderr and "power of two" in r.stderr


def test_cli_status_without_engines(tmp_path):
    r = _cli("engines", "status", "--dir", str(tmp_path / "none"))
    assert r.returncode == 1


def test_cli_up_status_down_stops_exactly_recorded_pids(tmp_path, private_redis):
    d = tmp_path / "eng"
    # without Cassandra: its JVM start costs 30-40 s under CI load and the pids checked
    # here are Redis's and Kafka's (the Cassandra engine: tests/dev/test_cassandra_engine.py)
    r = _cli("engines", "up", "--dir", str(d), "--shard-count", "2", "--without-cassandra")
    try:
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip().splitlines()[-1] == str(d / "engines.env")
        state = json.loads((d / "state.json").read_text())
        pids = [state["redis"]["pid"], state["kafka"]["pid"]]
        assert all(pid_alive(p) for p in pids)

        assert _cli("engines", "status", "--dir", str(d)).returncode == 0
        again = _cli("engines", "up", "--dir", str(d), "--without-cassandra")  # idempotent: same processes
        assert again.returncode == 0, again.stderr
        state2 = json.loads((d / "state.json").read_text())
        assert [state2["redis"]["pid"], state2["kafka"]["pid"]] == pids
        assert "QIM_MAILBOX_SHARD_COUNT=2" in again.stdout

        # a decoy: another redis-server (the private one) and a plain child process
        decoy = subprocess.Popen(["sleep", "60"])
        down = _cli("engines", "down", "--dir", str(d))
        assert down.returncode == 0, down.stderr
        assert not any(pid_alive(p) for p in pids)
        assert private_redis.alive() and private_redis.client().ping()
        assert decoy.poll() is None
        decoy.kill()
        decoy.wait()
        assert not (d / "engines.env").exists()
        st = _cli("engines", "status", "--dir", str(d))
        assert st.returncode == 1 and "down" in st.stdout
    finally:
        es = EngineSet.load(d)
        if es is not None:
            es.down(timeout=5)


def _append_sets_to_aof(redis_dir, n: int, value: bytes) -> int:
    """Append `n` SET commands (RESP) to the incr AOF of a stopped Redis; returns bytes."""
    incr = sorted((redis_dir / "appendonlydir").glob("*.incr.aof"))[-1]
    vlen = b"$%d\r\n%s\r\n" % (len(value), value)
    chunk = b"".join(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n" % (len(k), k) + vlen
                     for k in (b"qim:load:%d" % i for i in range(n)))
    with open(incr, "ab") as f:
        f.write(chunk)
    return len(chunk)


def test_redis_restart_with_large_aof_is_not_ready_while_loading(private_redis):
    # issue 10 fault 7: readiness = PING answered *and* INFO persistence loading:0
    r = private_redis.client()
    r.set("qim:test:before", b"1")
    r.close()
    private_redis.stop()
    n = 400_000
    size = _append_sets_to_aof(private_redis.dir, n, b"v" * 16)
    assert size > 15 * 2**20  # "an AOF of some MB": replaying it takes a visible while

    # (INFO loading flag, the engine's check just before it): loading never goes from 0
    # back to 1, so "ready" followed by loading:1 proves a premature "ready"
    samples = []
    done = threading.Event()

    def sample():
        c = redis.Redis(host="127.0.0.1", port=private_redis.port, socket_timeout=1,
                        decode_responses=True)
        while not done.is_set():
            try:
                ready = private_redis.healthy()
                samples.append((int(c.info("persistence")["loading"]), ready))
            except redis.ConnectionError:
                pass  # not listening yet
            time.sleep(0.005)
        c.close()

    t = threading.Thread(target=sample)
    t.start()
    try:
        private_redis.start()
    finally:
        done.set()
        t.join()
    c = private_redis.client(decode_responses=True)
    assert c.info("persistence")["loading"] == 0  # start() returned only once loaded
    assert c.dbsize() == n + 1 and c.get("qim:load:399999") == "v" * 16
    c.close()
    assert any(loading for loading, _ in samples), "the AOF loaded too fast to observe"
    assert not any(ready for loading, ready in samples if loading), \
        "reported ready while Redis was still loading its AOF"


def test_kafka_ready_means_our_topics_have_leaders(private_kafka):
    # readiness after a crash restart includes the QIM topics, not only "a broker"
    assert private_kafka.topics == {OUTBOX_TOPIC: 1, DISPATCH_TOPIC: TEST_SHARD_COUNT, PRESENCE_TOPIC: TEST_SHARD_COUNT}
    probe = KafkaEngine(private_kafka.dir, private_kafka.ports, topics={"qim.absent": 1})
    assert not probe._check_ready()  # a topic it should have is missing: not ready
    private_kafka.restart(hard=True)
    md = admin_client(private_kafka.bootstrap).list_topics(timeout=5)
    for topic, partitions in private_kafka.topics.items():
        parts = md.topics[topic].partitions
        assert len(parts) == partitions
        assert all(p.leader >= 0 and p.error is None for p in parts.values())


def test_cli_corrupt_state_is_one_line_error(tmp_path):
    d = tmp_path / "eng"
    d.mkdir()
    (d / "state.json").write_text("{not json")
    r = _cli("engines", "status", "--dir", str(d))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("qim-dev: error:")
    assert "Traceback" not in r.stderr


def test_engines_up_returns_only_when_every_partition_answers(tmp_path):
    # issue 10 fault 7: `engines up` returned while the just-created qim.dispatch
    # partitions still answered NOT_LEADER_FOR_PARTITION; the mailbox's first
    # watermark query then failed and `make up` with it
    es = EngineSet.up(tmp_path / "e", 64, die_with_parent=True)
    try:
        c = Consumer({"bootstrap.servers": es.kafka_bootstrap, "group.id": "t-ready",
                      "enable.auto.commit": False})
        try:
            for topic, n in ((DISPATCH_TOPIC, 64), (OUTBOX_TOPIC, 1)):
                for p in range(n):  # what MailboxNode does first, with no retry
                    low, high = c.get_watermark_offsets(TopicPartition(topic, p), 2,
                                                        cached=False)
                    assert (low, high) == (0, 0)
        finally:
            c.close()
    finally:
        es.down(timeout=5)
