"""Shared pytest configuration.

Real-engine fixtures live in tests/fixtures.py (see its docstring; not part of the wheel):
`engines` (session: one private Redis + Kafka), `private_redis`, `private_kafka`,
`private_cassandra`, `shared_cassandra`, `redis_three` (three standalone instances), `stack` (session: the QIM services on `engines`),
`fresh_stack`, `ops_stack` (session: a supervised private stack).

A failed test that ran on a stack reports its services' last warnings
(tests/failure_logs.py). A test that leaves a QIM_* environment variable changed after
its teardown errors, naming the variables, and the environment is put back: a leaked
QIM_MAILBOX_STORE once turned every later stack of the run to another store (decision
0118 §3: a test file must be safe beside any other).

The test session's JVMs (every Kafka broker and Cassandra node the fixtures and the
`qim-dev` commands under test start) run with the quick C1 compiler only unless
QIM_KAFKA_JVM_OPTS / QIM_CASSANDRA_JVM_OPTS say otherwise: they live for seconds to
minutes under light traffic, where C2's compiling is most of their CPU (docs/perf.md
"The broker's JIT"; a Kafka start 6.1 -> 3.7 s of CPU, a Cassandra start 10 -> 6 s) on
the two cores every test shares.
"""

import os

import pytest

from tests.failure_logs import service_warnings, stack_dirs
from tests.fixtures import (  # noqa: F401
    engines,
    fresh_stack,
    ops_stack,
    private_cassandra,
    private_kafka,
    private_redis,
    redis_three,
    shared_cassandra,
    stack,
)

for _var in ("QIM_KAFKA_JVM_OPTS", "QIM_CASSANDRA_JVM_OPTS"):
    os.environ.setdefault(_var, "-XX:TieredStopAtLevel=1")
# and no warm-up of a broker a fixture starts (qim/dev/kafka_warmup.py): it lives for
# seconds; tests/dev/test_kafka_warmup.py runs the warm-up itself
os.environ.setdefault("QIM_KAFKA_WARMUP_S", "0")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test on a stack gets its services' last warnings as a report section."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.when == "call":
        for d in stack_dirs(getattr(item, "funcargs", {})):
            try:
                text = service_warnings(d)
            except Exception as exc:  # noqa: BLE001 — a report section, never an INTERNALERROR
                text = f"(the service logs could not be read: {type(exc).__name__}: {exc})"
            if text:
                report.sections.append((f"service warnings ({d.name})", text))


_QIM_ENV = pytest.StashKey[dict]()


def _qim_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith("QIM_")}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """Keep the QIM_* environment as the test found it (compared after its teardown)."""
    item.stash[_QIM_ENV] = _qim_env()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Error the test whose QIM_* environment outlived its teardown, after putting it back."""
    result = yield
    before = item.stash.get(_QIM_ENV, None)
    after = _qim_env()
    if before is not None and after != before:
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        for k in changed:
            if k in before:
                os.environ[k] = before[k]
            else:
                os.environ.pop(k, None)
        raise AssertionError(f"the test left QIM_* variables changed: {', '.join(changed)} (use monkeypatch)")
    return result
