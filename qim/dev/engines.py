"""Development engine set: one private Redis (or N standalone instances: `redis_instances`,
qim/dev/redis_instances.py), one Kafka broker (or a KRaft cluster of three:
`brokers=3`, qim/dev/kafka_cluster.py), optionally one Cassandra.

`EngineSet.up(dir)` installs what is missing, starts (or restarts, keeping ports and
data) the engines, creates the QIM topics and writes:

- `dir/engines.env`: `QIM_REDIS_ADDR=…` (with several instances also
  `QIM_REDIS_CORE_ADDRS=…` and `QIM_REDIS_MAILBOX_ADDRS=…`), `QIM_KAFKA_BOOTSTRAP=…`,
  `QIM_MAILBOX_SHARD_COUNT=…` and, with Cassandra, `QIM_SCYLLA_ADDRS=…` and
  `QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV=1` (shell- and dotenv-readable);
- `dir/state.json`: pids, ports, dirs, shard count — `down` stops exactly those pids,
  and the next `up` reuses the ports and data.

Cassandra (the local stand-in for ScyllaDB, the archive tier, docs/decisions/0015 and 0023): `qim-dev
engines up` starts it unless `--without-cassandra` or QIM_DEV_WITH_CASSANDRA=0; the
library (`with_cassandra=None`) and the pytest fixtures in tests/fixtures.py only with
QIM_DEV_WITH_CASSANDRA=1 or `with_cassandra=True`. The object store (s3proxy) likewise with
QIM_DEV_WITH_S3 / `with_s3`, recorded in `dir/s3.json` (qim/dev/engines_s3.py).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from qim.consts import DEFAULT_SHARD_COUNT
from qim.dev import progress
from qim.dev._proc import pick_ports, rss_bytes
from qim.dev.cassandra_cluster import cluster_nodes, start_nodes
from qim.dev.cassandra_engine import CassandraEngine, ensure_cassandra_jars
from qim.dev.engine import Engine
from qim.dev.engines_s3 import s3_env, s3_of, s3_save, s3_up, s3_wanted
from qim.dev.kafka_cluster import bootstrap_of, cluster_of, start_engines
from qim.dev.kafka_engine import KafkaEngine, create_topics, ensure_kafka_jars, kafka_cache_dir, start_kafka
from qim.dev.kafka_warmup import warm_started
from qim.dev.redis_engine import RedisEngine, ensure_redis_installed, redis_instance, start_redis
from qim.dev.redis_instances import check_count, engines_of, layout_env
from qim.errors import EngineError

__all__ = ["EngineSet", "RedisEngine", "KafkaEngine", "CassandraEngine", "start_redis", "start_kafka",
           "create_topics", "default_dir", "kafka_cache_dir", "cassandra_wanted"]

log = logging.getLogger(__name__)
STATE_FILE = "state.json"
ENV_FILE = "engines.env"


def default_dir() -> Path:
    """`<repo>/.qim/engines` (git-ignored)."""
    return Path(__file__).resolve().parents[2] / ".qim" / "engines"


def cassandra_wanted(default: bool = False) -> bool:
    """True if QIM_DEV_WITH_CASSANDRA asks for the Cassandra engine ("1"/"0"); `default`
    when it is unset (the `qim-dev engines up` CLI: yes; the library and test fixtures: no,
    tests share one node: tests/fixtures.py `shared_cassandra`).

    Raises EngineError for any other value (a typo must not silently mean "no").
    """
    raw = os.environ.get("QIM_DEV_WITH_CASSANDRA", "1" if default else "0")
    if raw not in ("0", "1"):
        raise EngineError(f"QIM_DEV_WITH_CASSANDRA must be 0 or 1, got {raw!r}")
    return raw == "1"


class EngineSet:
    """Redis, Kafka and (optional) Cassandra engines recorded together in `dir/state.json`.

    Attributes: `dir`, `redis` (the first Redis instance: core 0, the home), `redises`
    (every Redis instance: one, or N standalone ones), `kafka` (the first broker), `kafkas` (every broker: one,
    or three of a KRaft cluster), `cassandra` (the first CQL node; None unless ever opted
    in), `cassandras` (every CQL node: one, or three of a cluster, qim/dev/cassandra_cluster.py),
    `shard_count`, `outbox_partitions`; `redis_addr` is "127.0.0.1:PORT",
    `kafka_bootstrap` the comma-separated broker list.
    """

    def __init__(self, dir: Path, redis: RedisEngine, kafka: KafkaEngine,
                 shard_count: int, cassandra: CassandraEngine | None = None,
                 kafkas: list[KafkaEngine] | None = None, outbox_partitions: int = 1,
                 cassandras: list[CassandraEngine] | None = None, redises: list[RedisEngine] | None = None) -> None:
        self.dir = Path(dir).resolve()
        self.redises, self.kafkas = list(redises or [redis]), list(kafkas or [kafka])
        self.redis, self.kafka = self.redises[0], self.kafkas[0]
        self.cassandras = list(cassandras or ([cassandra] if cassandra else []))
        self.cassandra = self.cassandras[0] if self.cassandras else None
        self.shard_count, self.outbox_partitions = shard_count, outbox_partitions
        self.s3 = s3_of(self.dir)  # the object store, when one was started (engines_s3.py)

    # --- addresses ----------------------------------------------------------
    @property
    def redis_addr(self) -> str:
        """"127.0.0.1:PORT" of Redis."""
        return self.redis.addr

    @property
    def redis_addrs(self) -> list[str]:
        """"127.0.0.1:PORT" of every Redis instance, in order (the layout's core list)."""
        return [r.addr for r in self.redises]

    @property
    def kafka_bootstrap(self) -> str:
        """"127.0.0.1:PORT[,...]" of the Kafka broker(s)."""
        return bootstrap_of(self.kafkas)

    @property
    def engines(self) -> list[Engine]:
        """Every recorded engine, in start order."""
        return [*self.redises, *self.kafkas, *self.cassandras, *([self.s3] if self.s3 else [])]

    @property
    def env_path(self) -> Path:
        """Path of engines.env."""
        return self.dir / ENV_FILE

    def env(self) -> dict[str, str]:
        """The QIM_* variables services read to find these engines.

        The Cassandra variables appear only while it runs (it is opt-in); the single-node
        development switch only with one node (three nodes: RF 3, docs/design.md §8).
        """
        env = {"QIM_REDIS_ADDR": self.redis_addr,  # the first core instance (qim/config/common.py)
               **layout_env(self.redis_addrs),  # several instances: the layout (qim/dev/redis_instances.py)
               "QIM_KAFKA_BOOTSTRAP": self.kafka_bootstrap,
               "QIM_MAILBOX_SHARD_COUNT": str(self.shard_count)}
        if self.cassandra is not None and self.cassandra.alive():
            env["QIM_SCYLLA_ADDRS"] = ",".join(c.addr for c in self.cassandras)
            if len(self.cassandras) == 1:
                env["QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV"] = "1"  # DESIGN §8: RF=1 only with it
        return {**env, **s3_env(self.s3)}

    # --- persistence ----------------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        """JSON-able record of every engine (pids, ports, dirs) and the shard count."""
        st = {"shard_count": self.shard_count, "dir": str(self.dir), "outbox_partitions": self.outbox_partitions,
              "redis": self.redis.to_state(), "kafka": self.kafka.to_state()}
        if len(self.redises) > 1:
            st["redis_instances"] = [r.to_state() for r in self.redises]
        if len(self.kafkas) > 1:
            st["kafka_brokers"] = [k.to_state() for k in self.kafkas]
        if self.cassandra is not None:
            st["cassandra"] = self.cassandra.to_state()
        if len(self.cassandras) > 1:
            st["cassandra_nodes"] = [c.to_state() for c in self.cassandras]
        return st

    def save(self) -> None:
        """Write state.json atomically (a crash mid-write must not lose the pids)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(self.to_state(), indent=2) + "\n")
        os.replace(tmp, self.dir / STATE_FILE)
        s3_save(self.dir, self.s3)

    def write_env(self) -> Path:
        """Write engines.env and return its path."""
        self.env_path.write_text("".join(f"{k}={v}\n" for k, v in self.env().items()))
        return self.env_path

    @classmethod
    def load(cls, dir: Path | str) -> "EngineSet | None":
        """The set recorded in `dir/state.json`, or None if there is none.

        Raises EngineError if the file is unreadable.
        """
        dir = Path(dir).resolve()
        path = dir / STATE_FILE
        if not path.exists():
            return None
        try:
            st = json.loads(path.read_text())
            r, k, c = st["redis"], st["kafka"], st.get("cassandra")
            cassandras = [CassandraEngine.from_state(n) for n in st.get("cassandra_nodes", [c] if c else [])]
            kafkas = [KafkaEngine.from_state(b) for b in st.get("kafka_brokers", [k])]
            redises = [redis_instance(Path(x["dir"]), x["ports"], i, x.get("pid"))
                       for i, x in enumerate(st.get("redis_instances", [r]))]
            return cls(dir, redises[0], kafkas[0], int(st["shard_count"]), None, kafkas,
                       int(st.get("outbox_partitions", 1)), cassandras, redises)
        except (ValueError, KeyError, TypeError) as e:
            raise EngineError(f"{path} is corrupt ({e}); stop its processes by hand "
                              f"and remove {dir}") from e

    # --- lifecycle --------------------------------------------------------------
    @classmethod
    def up(cls, dir: Path | str | None = None, shard_count: int | None = None,
           die_with_parent: bool = False, with_cassandra: bool | None = None, brokers: int | None = None,
           outbox_partitions: int | None = None, cql_nodes: int | None = None,
           redis_instances: int | None = None, with_s3: bool | None = None) -> "EngineSet":
        """Start the engines (idempotent) and return the running set, each truly ready.

        Healthy recorded engines are left alone; dead ones are restarted on their
        recorded ports and data; one still booting is waited for. `shard_count`
        defaults to the recorded one, else 64; a different count than recorded raises
        EngineError (topics cannot shrink). `with_cassandra` (default: env
        QIM_DEV_WITH_CASSANDRA) also starts Cassandra; a recorded Cassandra that is not
        asked for is left as it is; `cql_nodes` 3 makes it a cluster of three nodes
        (qim/dev/cassandra_cluster.py; default: recorded, else 1). `redis_instances` N
        starts N standalone Redis instances laid out as qim/dev/redis_instances.py says
        (default: recorded, else 1; another count than recorded raises EngineError: the
        placement of live keys is not rehashed). `die_with_parent` makes the engines exit with this
        process (test sessions). Raises EngineError if anything cannot be installed or
        started; engines started so far stay recorded in state.json so `down` can
        stop them.
        """
        dir = Path(dir or default_dir()).resolve()
        if with_cassandra is None:
            with_cassandra = cassandra_wanted()
        es = cls.load(dir)
        # None means "not asked"; 0 is asked, and refused below (never silently 64)
        if es is not None and shard_count is not None and shard_count != es.shard_count:
            raise EngineError(f"engines in {dir} were created with shard count "
                              f"{es.shard_count}, not {shard_count}; run `down` and "
                              f"remove {dir} to change it")
        if shard_count is None:
            shard_count = es.shard_count if es else DEFAULT_SHARD_COUNT
        if shard_count < 1 or shard_count & (shard_count - 1):
            raise EngineError(f"shard count must be a power of two, got {shard_count}")
        if brokers not in (None, 1, 3):
            raise EngineError(f"brokers must be 1 or 3, got {brokers}")
        if es is not None and brokers and brokers != len(es.kafkas):
            raise EngineError(f"engines in {dir} were created with {len(es.kafkas)} broker(s), not {brokers}; run "
                              f"`down` and remove {dir} to change it")
        if es is not None and outbox_partitions and outbox_partitions != es.outbox_partitions:
            raise EngineError(f"engines in {dir} were created with {es.outbox_partitions} Outbox partition(s), not "
                              f"{outbox_partitions}; run `down` and remove {dir} to change it")
        check_count(redis_instances, None if es is None else len(es.redises), dir)
        if cql_nodes not in (None, 1, 3):
            raise EngineError(f"cql_nodes must be 1 or 3, got {cql_nodes}")
        if es is not None and es.cassandras and cql_nodes and cql_nodes != len(es.cassandras):
            raise EngineError(f"engines in {dir} were created with {len(es.cassandras)} Cassandra node(s), not "
                              f"{cql_nodes}; run `down` and remove {dir} to change it")
        # install first, so a missing package fails before anything is running
        ensure_redis_installed()
        lib = ensure_kafka_jars()
        cassandra_lib = ensure_cassandra_jars() if with_cassandra else None
        if es is None:
            n, nr = brokers or 1, redis_instances or 1
            ports = pick_ports(nr + 2 * n)
            rps, kps = ports[:nr], ports[nr:]
            pairs = [{"main": kps[2 * i], "controller": kps[2 * i + 1]} for i in range(n)]
            kafkas = cluster_of(dir, pairs) if n > 1 else [KafkaEngine(dir / "kafka", pairs[0])]
            redises = engines_of(dir, rps)
            es = cls(dir, redises[0], kafkas[0], shard_count, kafkas=kafkas,
                     outbox_partitions=outbox_partitions or 1, redises=redises)
        if with_cassandra and es.cassandra is None:
            used = [p for e in es.engines for p in e.ports.values()]
            cq, cs = pick_ports(2, exclude=used)
            nodes = cql_nodes or 1
            if nodes == 1:
                es.cassandras = [CassandraEngine(dir / "cassandra", {"main": cq, "storage": cs})]
            else:
                es.cassandras = cluster_nodes(dir, {"main": cq, "storage": cs}, nodes)
            es.cassandra = es.cassandras[0]
        for k in es.kafkas:
            k.lib = lib
        for c in es.cassandras:
            c.lib = cassandra_lib or c.lib
        wanted: list[Engine] = [*es.redises, *es.kafkas]
        if with_cassandra:  # es.cassandras set just above when wanted
            wanted.extend(es.cassandras)
        for eng in wanted:
            eng.die_with_parent = die_with_parent
        es._start([e for e in wanted if e not in es.kafkas and e not in es.cassandras[1:]])
        if with_cassandra and len(es.cassandras) > 1:
            try:  # one after the other: a node joins through a seed that runs
                start_nodes(es.cassandras)
            finally:
                es.save()
        started = es._start_kafkas()
        topics = create_topics(es.kafka_bootstrap, es.shard_count, outbox_partitions=es.outbox_partitions,
                               replicas=min(3, len(es.kafkas)))
        for k in es.kafkas:
            k.topics = topics
        es.save()
        progress.note(f"waiting for every partition of {len(topics)} topics to answer")
        for k in es.kafkas:
            k.wait_ready(k.start_timeout)  # every new partition answers
        if started:
            warm_started(es.kafka_bootstrap, es.shard_count, min(3, len(es.kafkas)))
        if with_s3 if with_s3 is not None else s3_wanted():  # the object store (engines_s3.py)
            es.s3 = s3_up(dir, die_with_parent)
        progress.note("every engine ready")
        es.write_env()
        return es

    def _start(self, engines: list[Engine]) -> None:
        for eng in engines:
            if eng.healthy():
                log.info("%s already running pid=%s at %s", eng.name, eng.pid, eng.addr)
                progress.note(f"{eng.name} already running at {eng.addr}")
                continue
            if eng.alive():  # started by an earlier `up` that is still booting
                eng.wait_ready(eng.start_timeout)
            else:
                eng.start()
            self.save()

    def _start_kafkas(self) -> list[KafkaEngine]:
        """Every broker that is not healthy, together (a quorum needs two of three); the
        ones started."""
        down = [k for k in self.kafkas if not k.healthy()]
        try:
            start_engines(down)
        finally:
            self.save()
        return down

    def down(self, timeout: float = 15.0) -> None:
        """Stop exactly the recorded pids (SIGTERM, then SIGKILL after `timeout`).

        Ports and data stay recorded, so a later `up` brings the same engines back.
        Removes engines.env, which would otherwise point at dead ports.
        """
        try:
            for eng in reversed(self.engines):  # the JVMs first: they are slower to stop
                eng.stop(timeout)
                self.save()
        finally:
            self.env_path.unlink(missing_ok=True)

    def status(self) -> list[dict[str, Any]]:
        """One dict per engine: name, pid, alive, healthy, addr, rss_mib."""
        out = []
        for eng in self.engines:
            alive = eng.alive()
            out.append({"name": eng.name, "pid": eng.pid, "alive": alive,
                        "healthy": alive and eng.healthy(), "addr": eng.addr,
                        "rss_mib": rss_bytes(eng.pid) >> 20 if alive else 0})
        return out

    def all_healthy(self) -> bool:
        """True if every recorded engine is ready right now."""
        return all(s["healthy"] for s in self.status())
