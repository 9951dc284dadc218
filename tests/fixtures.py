"""pytest fixtures for real engines (imported by tests/conftest.py). They live under
tests/, not in the qim package, so the wheel carries no test code.

- `engines` (session): ONE private Redis + Kafka for the whole run, under a tmp dir,
  own ports, qim.dispatch with TEST_SHARD_COUNT partitions; stopped at session end.
  Yields an `EngineSet`: `.redis_addr`, `.kafka_bootstrap`, `.shard_count`, `.env()`.
- `private_redis` / `private_kafka` (function): instances of a test's own, for tests
  that kill or restart an engine so they cannot disturb the shared ones.
- `private_cassandra` (function): a Cassandra 5.0 node of the test's own (the local
  stand-in for ScyllaDB; ~10-40 s and ~1 GiB: only for tests that restart it).
- `shared_cassandra` (session): ONE Cassandra node for every other test that needs CQL
  (each takes a keyspace of its own); with QIM_TEST_CQL_NODES=3 a cluster of three
  (keyspaces RF 3: `make test-cql3`, tests/cql3/).
- `stack` (session): writer, mailbox, session, gateway and fanout as real processes on
  `engines`; a service that cannot start FAILS the tests (never skips). Defined here
  and only here: a second definition of a session fixture (a conftest importing it) is
  a second instance, and two stacks on one set of engines are two owners of every
  mailbox shard (tests/test_fixtures_defined_once.py).
- `fresh_stack` (function): private engines and services of the test's own, for tests
  that need untouched partitions or will kill something.
- `ops_stack` (session, created only when a test asks): private engines and services
  run by the stack's supervisor (qim/dev/supervisor.py), as `make up` runs them: for the
  operator tests that kill, restart or revoke (supervision, rolling restart, tokens).

`start_test_engines(base, with_cassandra=True)` (or QIM_DEV_WITH_CASSANDRA=1) adds
Cassandra to an EngineSet.
`start_test_engines(base, redis_instances=3)` (or QIM_TEST_REDIS_INSTANCES=3 for every
test's engines) runs three standalone Redis instances (qim/dev/redis_instances.py).

An engine that cannot start FAILS the tests that need it (ENGINES.md, "Rules").
The engines get a parent-death signal (setpriv --pdeathsig), so a killed pytest does not leave them running.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Iterable, Iterator

import pytest

from qim.dev.cassandra_engine import CassandraEngine, start_cassandra
from qim.dev.engines import EngineSet
from qim.dev.kafka_engine import KafkaEngine, start_kafka
from qim.dev.redis_engine import RedisEngine, start_redis
from qim.dev.stack import stack_up
from qim.errors import EngineError

log = logging.getLogger(__name__)

# 8 dispatch partitions instead of 64 keep the test broker light on two cores
TEST_SHARD_COUNT = 8
# the session stack closes silent unauthenticated connections fast; this is also the
# TLS handshake bound, which a loaded CI host needs to be a few seconds
AUTH_TIMEOUT_MS = 5000
ROOM_RING_EVENTS = 32


def start_test_engines(base_dir, shard_count: int = TEST_SHARD_COUNT,
                       with_cassandra: bool | None = None, brokers: int = 1, outbox_partitions: int = 1,
                       redis_instances: int | None = None) -> EngineSet:
    """Start a private EngineSet under `base_dir`; on failure stop what started.

    `with_cassandra` defaults to QIM_DEV_WITH_CASSANDRA; `brokers` 3 is a KRaft cluster
    (replication factor 3); `redis_instances` N standalone Redis instances (the layout of
    qim/dev/redis_instances.py, in the env every service gets; default
    QIM_TEST_REDIS_INSTANCES, else 1: every test stack on N instances). Raises EngineError
    with the engine's log tail.
    """
    import os

    if redis_instances is None:
        redis_instances = int(os.environ.get("QIM_TEST_REDIS_INSTANCES", "1"))
    try:
        return EngineSet.up(base_dir, shard_count, die_with_parent=True, with_cassandra=with_cassandra,
                            brokers=brokers, outbox_partitions=outbox_partitions, redis_instances=redis_instances)
    except BaseException:
        es = EngineSet.load(base_dir)
        if es is not None:
            es.down(timeout=5)
        raise


def _start(fn):
    # returns (engine, None) or (None, message): pytest.fail outside the except block
    # keeps the report to the engine's own message, without a chained traceback
    try:
        return fn(), None
    except EngineError as e:
        return None, str(e)


@pytest.fixture(scope="session")
def engines(tmp_path_factory):
    """Session-wide private Redis + Kafka (see module docstring)."""
    base = tmp_path_factory.mktemp("engines")
    es, err = _start(lambda: start_test_engines(base))
    if err:
        pytest.fail(f"engines could not start: {err}", pytrace=False)
    yield es
    es.down()


@pytest.fixture
def private_redis(tmp_path) -> RedisEngine:
    """A Redis of this test's own (AOF always); stopped after the test."""
    eng, err = _start(lambda: start_redis(tmp_path / "redis", die_with_parent=True))
    if err:
        pytest.fail(f"redis could not start: {err}", pytrace=False)
    yield eng
    eng.stop()


@contextlib.contextmanager
def redis_instances(dirs: Iterable[Path]) -> Iterator[list[RedisEngine]]:
    """Standalone Redis instances (AOF always), one per directory, stopped (by their
    engine objects) on leaving; pytest.fail naming the error when one cannot start (the
    ones started already are stopped). Several instances of one layout: decision 0096."""
    started: list[RedisEngine] = []
    try:
        for d in dirs:
            started.append(start_redis(d, die_with_parent=True))
    except EngineError as exc:
        for eng in started:
            eng.stop()
        pytest.fail(f"redis could not start: {exc}", pytrace=False)
    try:
        yield started
    finally:
        for eng in started:
            eng.stop()


@pytest.fixture
def redis_three(tmp_path) -> Iterator[list[RedisEngine]]:
    """Three standalone Redis instances of this test's own, stopped after it."""
    with redis_instances(tmp_path / f"redis{i}" for i in range(3)) as engs:
        yield engs


@pytest.fixture
def private_kafka(tmp_path) -> KafkaEngine:
    """A Kafka broker of this test's own with the QIM topics; stopped after the test.

    Costs ~5 s and ~200 MiB: use only for tests that crash or restart the broker.
    """
    eng, err = _start(lambda: start_kafka(tmp_path / "kafka", TEST_SHARD_COUNT,
                                          die_with_parent=True))
    if err:
        pytest.fail(f"kafka could not start: {err}", pytrace=False)
    yield eng
    eng.stop()


@pytest.fixture
def private_cassandra(tmp_path) -> CassandraEngine:
    """A Cassandra node of this test's own (.cluster() for a scylla-driver Cluster);
    stopped after the test."""
    eng, err = _start(lambda: start_cassandra(tmp_path / "cassandra", die_with_parent=True))
    if err:
        pytest.fail(f"cassandra could not start: {err}", pytrace=False)
    yield eng
    eng.stop()


class SharedCassandra:
    """The session's CQL cluster: `addr` ("127.0.0.1:PORT", or every node's, comma-separated),
    `engine` (the first node; None when it is an outside node named by QIM_TEST_SCYLLA_ADDR),
    `nodes` (every node's engine), `scylla(keyspace)` -> ScyllaConfig. One node: the
    single-node development switch; three: none (keyspaces RF 3)."""

    def __init__(self, addr: str, engine: CassandraEngine | None, nodes: list | None = None) -> None:
        self.addr = addr
        self.engine = engine
        self.nodes = list(nodes or ([engine] if engine else []))

    @property
    def single(self) -> bool:
        """One node (RF 1 with QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV)."""
        return "," not in self.addr

    def scylla(self, keyspace: str):
        """A ScyllaConfig for `keyspace` on these nodes (one node: the development switch)."""
        from qim.config.tier import ScyllaConfig

        hosts = [a.rsplit(":", 1) for a in self.addr.split(",")]
        return ScyllaConfig(tuple(h for h, _ in hosts), int(hosts[0][1]), keyspace,
                            allow_single_node_dev=self.single)

    def env(self, keyspace: str) -> dict[str, str]:
        """The QIM_SCYLLA_* variables of a stack using `keyspace` on these nodes."""
        return {"QIM_SCYLLA_ADDRS": self.addr, "QIM_SCYLLA_KEYSPACE": keyspace,
                **({"QIM_SCYLLA_ALLOW_SINGLE_NODE_DEV": "1"} if self.single else {})}


@pytest.fixture(scope="session")
def shared_cassandra(tmp_path_factory) -> SharedCassandra:
    """ONE Cassandra node for every test that needs CQL (CI on two cores cannot
    afford one per test; each user takes a keyspace of its own). QIM_TEST_SCYLLA_ADDR
    (host:port) uses a node that is already running instead (development)."""
    import os

    outside = os.environ.get("QIM_TEST_SCYLLA_ADDR", "")
    if outside:
        yield SharedCassandra(outside, None)
        return
    base = tmp_path_factory.mktemp("cassandra")
    if os.environ.get("QIM_TEST_CQL_NODES", "1") != "1":
        from tests.cqlcluster import shared_cluster

        yield from shared_cluster(base, os.environ["QIM_TEST_CQL_NODES"])
        return
    eng, err = _start(lambda: start_cassandra(base, die_with_parent=True))
    if err:
        pytest.fail(f"cassandra could not start: {err}", pytrace=False)
    yield SharedCassandra(eng.addr, eng)
    eng.stop()


def start_private_stack(base, engines_kw=None, supervise: bool = False, **stack_kw):
    """Private engines and QIM services under `base` (the caller stops `st` and
    `st.engines`); FAILS the test (never skips) when they cannot start. `engines_kw` goes
    to start_test_engines (brokers=, outbox_partitions=, redis_instances=), `stack_kw` to
    qim.dev.stack.stack_up (writers=, mailboxes=, extra_env=); `supervise`: the
    services run under the stack's supervisor (qim.dev.supervisor)."""
    from qim.dev.stack import stack_up
    from qim.dev.supervisor import supervised_stack_up

    up = supervised_stack_up if supervise else stack_up

    es, err = _start(lambda: start_test_engines(base / "engines", **(engines_kw or {})))
    if err:
        pytest.fail(f"engines could not start: {err}", pytrace=False)
    st, err = _start(lambda: up(base / "stack", es.env(), die_with_parent=True, **stack_kw))
    if err:
        es.down()
        pytest.fail(f"QIM services could not start: {err}", pytrace=False)
    st.engines = es
    return st


@contextlib.contextmanager
def running_stack(base, **stack_kw):
    """start_private_stack for a `with` block: both are stopped afterwards."""
    st = start_private_stack(base, **stack_kw)
    try:
        yield st
    finally:
        st.down()
        st.engines.down()


@pytest.fixture(scope="session")
def stack(engines, tmp_path_factory):
    """The session's one QIM stack on `engines` (module docstring)."""
    try:
        st, err = stack_up(tmp_path_factory.mktemp("stack"), engines.env(), die_with_parent=True,
                           extra_env={"QIM_AUTH_TIMEOUT_MS": str(AUTH_TIMEOUT_MS),
                                      # small rings: the room tests wrap one with 40 posts
                                      "QIM_ROOM_RING_EVENTS": str(ROOM_RING_EVENTS),
                                      # the session's tests run the overtake path (off by
                                      # default; decisions/0142), private stacks the default
                                      "QIM_MAILBOX_OVERTAKE": "1"}), None
    except EngineError as exc:
        st, err = None, str(exc)
    if err:
        pytest.fail(f"QIM services could not start: {err}", pytrace=False)
    yield st
    st.down()


@pytest.fixture(scope="session")
def ops_stack(tmp_path_factory):
    """A supervised private stack for the operator tests (module docstring): two writers,
    mailbox and session nodes each (a rolling restart covers several nodes of a kind),
    one gateway and fanout. Its gateway
    trusts the development key and a JWKS document (`st.jwks_path`, first key
    `st.jwks_key` under kid "ops-a", read again every 5 s) and allows no clock leeway (so
    token expiry tests are short); every service logs its per-message trace lines."""
    import json

    from qim.wire.jwks import jwk_of
    from qim.wire.tokens import SigningKey

    base = tmp_path_factory.mktemp("ops")
    key = SigningKey.generate()
    jwks = base / "jwks.json"
    jwks.write_text(json.dumps({"keys": [jwk_of(key.verify_key(), "ops-a")]}))
    with running_stack(base, supervise=True, nodes={"writer": 2, "mailbox": 2, "session": 2},
                       extra_env={"QIM_TOKEN_JWKS": str(jwks),  # the default 10 s AUTH (and TLS) timeout
                                  "QIM_TOKEN_JWKS_REFRESH_S": "5", "QIM_TOKEN_LEEWAY_S": "0",
                                  "QIM_LOG_TRACE": "1"}) as st:
        st.jwks_path, st.jwks_key = jwks, key
        yield st


@pytest.fixture
def fresh_stack(tmp_path):
    """Private engines and services of the test's own, stopped afterwards."""
    with running_stack(tmp_path) as st:
        yield st
