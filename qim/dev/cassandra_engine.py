"""A private single-node Apache Cassandra 5.0: the local stand-in for ScyllaDB.

ScyllaDB is in no registry; Cassandra speaks the same CQL protocol and its jars are on
Maven Central (`dev/cassandra/pom.xml`, cached like the Kafka jars). The JVM is started
the way Cassandra's own scripts start it (conf/jvm17-server.options of the 5.0 source:
the JPMS `--add-exports/--add-opens` list; cassandra-env.sh: the jamm javaagent), with
a minimal cassandra.yaml: one token, SimpleSnitch, 127.0.0.1, own ports and
directories. No JMX port is opened (no `cassandra.jmx.*` property).

Started by `qim-dev engines up` unless `--without-cassandra` or QIM_DEV_WITH_CASSANDRA=0:
the archive tier (qim-archiver, the tiered MessageStore; docs/decisions/0023) runs on it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from qim.dev._proc import pick_ports, port_in_use, require_executable
from qim.dev.engine import Engine
from qim.dev.maven import REPO_ROOT, ensure_jars
from qim.errors import EngineError

log = logging.getLogger(__name__)

# keep in step with <cassandra.version> in dev/cassandra/pom.xml; it names the jar cache
CASSANDRA_VERSION = "5.0.6"
POM = REPO_ROOT / "dev" / "cassandra" / "pom.xml"
# fits beside Kafka (-Xmx512m) on a 2-core / 24 GiB machine; QIM_CASSANDRA_HEAP_MB overrides
HEAP_MB = 512  # measured: RSS ~0.95 GiB idle
CLUSTER_NODE_START_TIMEOUT_S = 600.0
CQL_PROTOCOL_VERSION = 4  # the newest ScyllaDB speaks; Cassandra 5.0 would offer v5

# conf/jvm17-server.options ("JPMS"), Cassandra 5.0
JVM17_SERVER_OPTIONS = [
    "-Djdk.attach.allowAttachSelf=true",
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports", "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports", "java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports", "java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports", "java.sql/java.sql=ALL-UNNAMED",
    "--add-exports", "java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports", "jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports", "jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports", "jdk.attach/sun.tools.attach=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11",
]

LOGBACK_XML = """<configuration scan="false">
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%-5level [%thread] %date{{ISO8601}} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="{level}"><appender-ref ref="FILE"/></root>
</configuration>
"""


def cassandra_cache_dir() -> Path:
    """Jar cache: $QIM_CASSANDRA_CACHE or ~/.cache/qim/cassandra-<version>."""
    env = os.environ.get("QIM_CASSANDRA_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "qim" / f"cassandra-{CASSANDRA_VERSION}"


def ensure_cassandra_jars(cache: Path | None = None) -> Path:
    """Return the directory of Cassandra jars (`<cache>/lib/*.jar`), fetching them with
    Maven if needed (qim.dev.maven.ensure_jars). Raises EngineError if Maven fails."""
    return ensure_jars("cassandra", POM, cache or cassandra_cache_dir(), "cassandra-all-*.jar")


class CassandraEngine(Engine):
    """Single-node Cassandra 5.0 in `dir` (data, commitlog, hints, caches below it).

    ports: {"main": native transport (CQL), "storage": internode}; `.addr` is
    "127.0.0.1:<CQL port>". Ready when a CQL session answers
    `SELECT release_version FROM system.local`. Restart keeps ports and data; the
    commit log is synced before a write is acknowledged (`commitlog_sync: batch`), so a
    SIGKILL loses no acknowledged write, as on ScyllaDB.
    """

    name = "cassandra"
    start_timeout = 180.0  # ~25-40 s on two idle cores; much more beside a busy test run
    exit_code_on_term = 143

    def __init__(self, dir, ports, pid=None, die_with_parent=False, lib: Path | None = None,
                 host: str = "127.0.0.1", seeds: tuple[str, ...] = (), initial_token: int = 0,
                 cluster_size: int = 1):
        super().__init__(dir, ports, pid, die_with_parent)
        self.lib = Path(lib) if lib else cassandra_cache_dir() / "lib"
        # a node of a cluster (qim/dev/cassandra_cluster.py): its own loopback address,
        # the same ports as its peers, the seeds' addresses and its token
        self.host = host
        self.seeds = tuple(seeds) or (host,)
        self.initial_token = initial_token
        self.cluster_size = cluster_size
        if cluster_size > 1:  # three JVMs beside Kafka on two loaded cores: minutes each
            self.start_timeout = CLUSTER_NODE_START_TIMEOUT_S

    def to_state(self) -> dict:
        """Engine.to_state plus the node's address, seeds, token and cluster size."""
        return {**super().to_state(), "host": self.host, "seeds": list(self.seeds),
                "initial_token": self.initial_token, "cluster_size": self.cluster_size}

    @classmethod
    def from_state(cls, st: dict) -> "CassandraEngine":
        """The engine recorded by `to_state` (older records: a single node on 127.0.0.1)."""
        return cls(Path(st["dir"]), st["ports"], st.get("pid"), host=st.get("host", "127.0.0.1"),
                   seeds=tuple(st.get("seeds", ())), initial_token=int(st.get("initial_token", 0)),
                   cluster_size=int(st.get("cluster_size", 1)))

    @property
    def port(self) -> int:
        """CQL (native transport) port."""
        return self.ports["main"]

    @property
    def log_paths(self) -> list[Path]:
        """stdout.log (JVM warnings) and system.log (Cassandra's logback log)."""
        return [self.dir / "stdout.log", self.dir / "system.log"]

    def cluster(self, **kw):
        """A scylla-driver `Cluster` for this node (call `.connect()`, then `.shutdown()`)."""
        # the scylla-driver: a dev/test dependency, imported only when CQL is used
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
        from cassandra.policies import WhiteListRoundRobinPolicy

        profile = ExecutionProfile(
            load_balancing_policy=WhiteListRoundRobinPolicy([self.host]), request_timeout=10)
        kw.setdefault("protocol_version", CQL_PROTOCOL_VERSION)
        kw.setdefault("connect_timeout", 5)
        kw.setdefault("control_connection_timeout", 5)
        return Cluster([self.host], port=self.port,
                       execution_profiles={EXEC_PROFILE_DEFAULT: profile}, **kw)

    def _yaml(self) -> str:
        d = self.dir
        seeds = ",".join(f"{h}:{self.ports['storage']}" for h in self.seeds)
        single = self.cluster_size == 1
        # keys in the duration/size form of 5.0 (the *_in_ms forms are deprecated)
        return "\n".join([
            "cluster_name: qim-dev",
            "num_tokens: 1",
            # one node: any token (a fixed one avoids a warning); a cluster: evenly spaced
            f"initial_token: {self.initial_token}",
            "partitioner: org.apache.cassandra.dht.Murmur3Partitioner",
            "endpoint_snitch: SimpleSnitch",  # datacenter1 / rack1 (QIM_SCYLLA_LOCAL_DC's default)
            "seed_provider:",
            "  - class_name: org.apache.cassandra.locator.SimpleSeedProvider",
            f"    parameters: [{{seeds: \"{seeds}\"}}]",
            f"listen_address: {self.host}",
            f"rpc_address: {self.host}",
            f"storage_port: {self.ports['storage']}",
            f"native_transport_port: {self.port}",
            "start_native_transport: true",
            # a new cluster of fixed tokens: nothing to stream, so no bootstrap wait
            "auto_bootstrap: false",
            f"data_file_directories: [{d / 'data'}]",
            f"commitlog_directory: {d / 'commitlog'}",
            f"saved_caches_directory: {d / 'saved_caches'}",
            f"hints_directory: {d / 'hints'}",
            f"cdc_raw_directory: {d / 'cdc_raw'}",
            "commitlog_sync: batch",
            "commitlog_segment_size: 8MiB",
            "auto_snapshot: false",  # a dropped test keyspace leaves no snapshot behind
            "concurrent_compactors: 1",
            "disk_optimization_strategy: ssd",
            # a small machine (docs/operations.md, "Engine settings"): no dynamic snitch
            # (it recomputes scores every 100 ms), hints only where there is a peer to hold
            # them for (a restarted node of a cluster catches up), and request pools sized
            # for two cores instead of 32 threads each
            "dynamic_snitch: false",
            f"hinted_handoff_enabled: {'false' if single else 'true'}",
            "concurrent_reads: 8",
            "concurrent_writes: 8",
            "concurrent_counter_writes: 4",
            "concurrent_materialized_view_writes: 4",
            "native_transport_max_threads: 16",
            "",
        ])

    def _prepare(self) -> None:
        if not any(self.lib.glob("cassandra-all-*.jar")):
            raise EngineError(f"cassandra: no jars in {self.lib} (ensure_cassandra_jars first)")
        (self.dir / "cassandra.yaml").write_text(self._yaml())
        (self.dir / "triggers").mkdir(exist_ok=True)
        level = os.environ.get("QIM_CASSANDRA_LOG_LEVEL", "WARN")
        (self.dir / "logback.xml").write_text(
            LOGBACK_XML.format(log=self.dir / "system.log", level=level))

    def _command(self) -> list[str]:
        raw = os.environ.get("QIM_CASSANDRA_HEAP_MB", str(HEAP_MB))
        if not raw.isdigit() or not 256 <= int(raw) <= 16384:
            raise EngineError(f"QIM_CASSANDRA_HEAP_MB must be a number of MiB in 256..16384, "
                              f"got {raw!r}")
        heap = int(raw)
        jamm = sorted(self.lib.glob("jamm-*.jar"))
        if not jamm:
            raise EngineError(f"cassandra: no jamm jar in {self.lib}")
        return [require_executable("java"), f"-Xms{heap}m", f"-Xmx{heap}m", "-Xss256k",
                "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=300", "-XX:+ExitOnOutOfMemoryError",
                "-XX:ActiveProcessorCount=2", "-Djava.net.preferIPv4Stack=true",
                "-Djava.awt.headless=true", *JVM17_SERVER_OPTIONS,
                f"-javaagent:{jamm[-1]}",
                f"-Dcassandra.config=file://{self.dir / 'cassandra.yaml'}",
                "-Dcassandra-foreground=yes",
                f"-Dcassandra.storagedir={self.dir}", f"-Dcassandra.logdir={self.dir}",
                f"-Dlogback.configurationFile={self.dir / 'logback.xml'}",
                f"-Dcassandra.triggers_dir={self.dir / 'triggers'}",
                # one node, its own seed: nothing to wait for in gossip; a cluster's node
                # is waited for by qim/dev/cassandra_cluster.py (every peer seen UP)
                "-Dcassandra.skip_wait_for_gossip_to_settle=0",
                # the approximate clock (request expiry, timeouts of seconds) is sampled
                # every 2 ms by default: 500 wake-ups a second, a third of an idle node's
                # CPU (the ScheduledFastTasks thread); 10 ms is precise enough
                "-Dcassandra.approximate_time_precision_ms=10",
                # QIM_CASSANDRA_JVM_OPTS: extra JVM options, after ours so they win (the
                # tests' short-lived nodes: -XX:TieredStopAtLevel=1, tests/conftest.py)
                *os.environ.get("QIM_CASSANDRA_JVM_OPTS", "").split(),
                "-cp", f"{self.lib}/*", "org.apache.cassandra.service.CassandraDaemon"]

    def _check_ready(self) -> bool:
        """A CQL session answers `SELECT release_version FROM system.local`."""
        if not port_in_use(self.port, self.host):  # cheap, and keeps the driver's log quiet
            return False
        cluster = self.cluster()
        try:
            row = cluster.connect().execute("SELECT release_version FROM system.local").one()
            return bool(row and row.release_version)
        finally:
            cluster.shutdown()


def start_cassandra(dir: Path | str, ports: dict | None = None, timeout: float | None = None,
                    die_with_parent: bool = False) -> CassandraEngine:
    """Fetch jars if needed, start a private Cassandra under `dir`, wait for CQL.

    `ports` defaults to free ones ({"main": CQL, "storage": internode}). Raises
    EngineError (with the tail of its logs) if it cannot start.
    """
    lib = ensure_cassandra_jars()
    if not ports:
        main, storage = pick_ports(2)
        ports = {"main": main, "storage": storage}
    eng = CassandraEngine(Path(dir), ports, lib=lib, die_with_parent=die_with_parent)
    try:
        return eng.start(timeout)
    except OSError as e:
        raise EngineError(f"cassandra: cannot start in {dir}: {e}") from e
