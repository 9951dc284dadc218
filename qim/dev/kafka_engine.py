"""Private KRaft Kafka brokers built from Maven Central jars: one, or a cluster of three.

Production runs Redpanda, which is in no registry; Apache Kafka speaks the same API
(ENGINES.md, "Kafka API"). The jars come from `dev/kafka/pom.xml` through Maven into a
cache reused between runs; each broker gets its own data dir and ports.

One broker (the default) flushes every append to stand in for replication. Three
(`qim-dev engines up --brokers 3`, docs/design.md §13 "Brokers") are each broker and
controller of one KRaft quorum on loopback, with replication factor 3,
min.insync.replicas 2 for every topic (producers use acks=all), and no per-append flush:
durability is the replication, as in production. `start_cluster` starts them together
(a controller quorum needs two of three before any broker is ready). The QIM topics:
qim.dev.kafka_topics (`admin_client` and `create_topics` are importable from here too).
"""

from __future__ import annotations

import base64
import os
import subprocess
import uuid
from pathlib import Path

from confluent_kafka import TopicPartition
from confluent_kafka.admin import OffsetSpec

from qim.consts import KAFKA_MAX_RECORD_BYTES
from qim.dev._proc import pick_ports, port_in_use, require_executable
from qim.dev.engine import Engine
from qim.dev.kafka_topics import admin_client, create_topics
from qim.dev.maven import REPO_ROOT, ensure_jars
from qim.errors import EngineError

# keep in step with <kafka.version> in dev/kafka/pom.xml; it names the jar cache
KAFKA_VERSION = "4.1.1"
POM = REPO_ROOT / "dev" / "kafka" / "pom.xml"
HEAP = "-Xmx512m"
CLUSTER_HEAP = "-Xmx384m"  # each of three brokers on a small machine

LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <File name="file" fileName="{log}">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="{level}"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
"""


def kafka_cache_dir() -> Path:
    """Jar cache: $QIM_KAFKA_CACHE or ~/.cache/qim/kafka-<version>."""
    env = os.environ.get("QIM_KAFKA_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "qim" / f"kafka-{KAFKA_VERSION}"


def ensure_kafka_jars(cache: Path | None = None) -> Path:
    """Return the directory of broker jars (`<cache>/lib/*.jar`), fetching them with
    Maven if needed (qim.dev.maven.ensure_jars). Raises EngineError if Maven fails."""
    return ensure_jars("kafka", POM, cache or kafka_cache_dir(), "kafka_2.13-*.jar")


def _random_cluster_id() -> str:
    # Kafka's Uuid.randomUuid(): url-safe base64 of 16 random bytes, no padding, and
    # never starting with "-" (it would read as a command-line option)
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


class KafkaEngine(Engine):
    """A KRaft broker+controller in `dir` (data in `dir/data`): alone, or node `node_id`
    of a cluster whose controller quorum is `voters` ("1@127.0.0.1:P1,2@...") formatted
    with the shared `cluster_id`.

    ports: {"main": PLAINTEXT, "controller": CONTROLLER}; `.addr` is this broker's
    "127.0.0.1:PORT". Restart keeps ports, cluster id and data. `topics`
    ({name: partitions}, set once `create_topics` made them) is part of readiness: a
    restarted broker is ready only when its metadata lists them with a leader for
    every partition.
    """

    name = "kafka"
    start_timeout = 90.0  # a cold JVM on two busy cores takes ~10 s; leave room
    exit_code_on_term = 143  # the JVM's exit code after its SIGTERM shutdown hooks

    def __init__(self, dir, ports, pid=None, die_with_parent=False, lib: Path | None = None,
                 topics: dict[str, int] | None = None, node_id: int = 1, voters: str = "", cluster_id: str = "",
                 brokers: int = 1):
        super().__init__(dir, ports, pid, die_with_parent)
        self.lib = Path(lib) if lib else kafka_cache_dir() / "lib"
        self.topics = dict(topics or {})
        self.node_id, self.voters, self.cluster_id, self.brokers = node_id, voters, cluster_id, brokers
        if brokers > 1:
            self.name = f"kafka{node_id}"

    @property
    def bootstrap(self) -> str:
        """Bootstrap address "127.0.0.1:PORT" (same as `addr`)."""
        return self.addr

    @property
    def log_paths(self) -> list[Path]:
        """stdout.log and the broker's server.log."""
        return [self.dir / "stdout.log", self.dir / "server.log"]

    def _properties(self) -> str:
        p, c = self.ports["main"], self.ports["controller"]
        replicas = min(3, self.brokers)
        isr = 2 if replicas >= 3 else 1
        props = {
            "process.roles": "broker,controller",
            "node.id": self.node_id,
            "controller.quorum.voters": self.voters or f"{self.node_id}@127.0.0.1:{c}",
            "listeners": f"PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{p}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": self.dir / "data",
            "auto.create.topics.enable": "false",  # topics come from create_topics only
            "num.partitions": 1,
            "default.replication.factor": replicas,
            "min.insync.replicas": isr,
            "offsets.topic.replication.factor": replicas,
            "offsets.topic.num.partitions": 4,  # default 50 is heavy for dev brokers
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": isr,
            "transaction.state.log.num.partitions": 4,
            "share.coordinator.state.topic.replication.factor": replicas,
            "share.coordinator.state.topic.min.isr": isr,
            # a broker back from a crash catches up before it leads again
            "unclean.leader.election.enable": "false",
            "group.initial.rebalance.delay.ms": 0,
            "log.cleaner.dedupe.buffer.size": 1048577,  # default 128 MB OOMs -Xmx512m
            "message.max.bytes": KAFKA_MAX_RECORD_BYTES,
            "replica.fetch.max.bytes": KAFKA_MAX_RECORD_BYTES,
            # after a SIGKILL the restarted broker must wait for its old session to
            # expire (default 9 s); crash tests restart often, so keep it short
            "broker.session.timeout.ms": 3000,
            "broker.heartbeat.interval.ms": 750,
            "num.network.threads": 2,  # two cores: the defaults (3 / 8) only contend
            "num.io.threads": 2,
            # the controller appends a no-op record to the metadata log this often (default
            # 500 ms: an append, a flush and a metadata publish twice a second on an idle
            # broker); liveness comes from the broker heartbeats above, not from these
            # (docs/decisions/0053-kafka-idle-and-batching.md)
            "metadata.max.idle.interval.ms": 5000,
        }
        if self.brokers == 1:
            # Redpanda fsyncs before it acks; flush every append so a crash test against
            # one broker has the durability production gets from replication
            props["log.flush.interval.messages"] = 1
        else:
            props["replica.lag.time.max.ms"] = 10000  # a busy 2-core host must not shrink the ISR
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def _java(self, main_class: str, *args: str, heap: str = "") -> list[str]:
        heap = heap or (CLUSTER_HEAP if self.brokers > 1 else HEAP)
        # QIM_KAFKA_JVM_OPTS: extra JVM options of the development broker (measurements)
        extra = os.environ.get("QIM_KAFKA_JVM_OPTS", "").split()
        return [require_executable("java"), heap, "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", *extra,
                "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={self.dir / 'log4j2.xml'}",
                f"-Dkafka.logs.dir={self.dir}",
                "-cp", f"{self.lib}/*", main_class, *args]

    def _prepare(self) -> None:
        if not any(self.lib.glob("kafka_2.13-*.jar")):
            raise EngineError(f"kafka: no broker jars in {self.lib} (ensure_kafka_jars first)")
        (self.dir / "server.properties").write_text(self._properties())
        # WARN keeps the log small; QIM_KAFKA_LOG_LEVEL=INFO when debugging the broker
        level = os.environ.get("QIM_KAFKA_LOG_LEVEL", "WARN")
        (self.dir / "log4j2.xml").write_text(
            LOG4J2_XML.format(log=self.dir / "server.log", level=level))
        if (self.dir / "data" / "meta.properties").exists():
            return  # formatted before: keep cluster id and data across restarts
        self.cluster_id = self.cluster_id or _random_cluster_id()
        cmd = self._java("kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                         "-c", str(self.dir / "server.properties"), heap="-Xmx256m")
        r = subprocess.run(cmd, cwd=self.dir, capture_output=True, text=True)
        if r.returncode != 0:
            raise EngineError(f"kafka: storage format failed ({r.returncode}):\n"
                              f"{(r.stdout + r.stderr)[-3000:]}")

    def _command(self) -> list[str]:
        return self._java("kafka.Kafka", str(self.dir / "server.properties"))

    def _check_ready(self) -> bool:
        """The broker answers a metadata request listing itself and our topics, each
        with its partition count and a leader for every partition, and the leader of
        every partition answers ListOffsets.

        Metadata alone is not enough: right after a topic is created (or the broker
        restarted) it names a leader while that broker still answers
        NOT_LEADER_FOR_PARTITION, and a service that starts then fails on its first
        watermark query (a stale answer would make an audit or a test wait on an old position).
        """
        # TCP first: librdkafka would otherwise log a connection error per attempt
        if not port_in_use(self.ports["main"]):
            return False
        md = admin_client(self.addr).list_topics(timeout=3)
        if len(md.brokers) < 1:
            return False
        for name, partitions in self.topics.items():
            t = md.topics.get(name)
            if t is None or t.error is not None or len(t.partitions) != partitions:
                return False
            if any(p.error is not None or p.leader < 0 for p in t.partitions.values()):
                return False
        return self._partitions_answer()

    def _partitions_answer(self) -> bool:
        """One ListOffsets (latest) for every partition of `topics`; raises the first
        partition's KafkaException (e.g. NOT_LEADER_FOR_PARTITION) if one fails."""
        if not self.topics:
            return True
        want = {TopicPartition(t, p): OffsetSpec.latest()
                for t, n in self.topics.items() for p in range(n)}
        # keep the client referenced until every future resolved: a collected
        # AdminClient never completes its futures
        admin = admin_client(self.addr)
        futures = admin.list_offsets(want, request_timeout=5)
        for fut in futures.values():
            fut.result(timeout=10)
        return True

    def to_state(self) -> dict:
        """Engine.to_state plus the topics readiness waits for and the cluster membership."""
        return {**super().to_state(), "topics": self.topics, "node_id": self.node_id, "voters": self.voters,
                "cluster_id": self.cluster_id, "brokers": self.brokers}

    @classmethod
    def from_state(cls, st: dict) -> "KafkaEngine":
        """The engine recorded by `to_state` (KeyError / TypeError when malformed)."""
        return cls(Path(st["dir"]), st["ports"], st.get("pid"), topics=st.get("topics"),
                   node_id=int(st.get("node_id", 1)), voters=st.get("voters", ""),
                   cluster_id=st.get("cluster_id", ""), brokers=int(st.get("brokers", 1)))


def start_kafka(dir: Path | str, shard_count: int | None = None, ports: dict | None = None,
                timeout: float | None = None, die_with_parent: bool = False) -> KafkaEngine:
    """Fetch jars if needed, start a private broker under `dir`, wait for metadata.

    If `shard_count` is given, also creates the QIM topics (see `create_topics`).
    Raises EngineError (with the tail of the broker logs) if it cannot start.
    """
    lib = ensure_kafka_jars()
    if not ports:
        main, controller = pick_ports(2)
        ports = {"main": main, "controller": controller}
    eng = KafkaEngine(Path(dir), ports, lib=lib, die_with_parent=die_with_parent)
    try:
        eng.start(timeout)
    except OSError as e:
        raise EngineError(f"kafka: cannot start in {dir}: {e}") from e
    if shard_count:
        eng.topics = create_topics(eng.addr, shard_count)
        eng.wait_ready(timeout or eng.start_timeout)  # every new partition answers
    return eng


__all__ = ["KafkaEngine", "admin_client", "create_topics", "ensure_kafka_jars", "kafka_cache_dir", "start_kafka"]
