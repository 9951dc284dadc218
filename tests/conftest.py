"""Shared pytest configuration.

Real-engine fixtures live in tests/fixtures.py (see its docstring; not part of the wheel):
`engines` (session: one private Redis + Kafka), `private_redis`, `private_kafka`,
`private_cassandra`, `shared_cassandra`, `redis_three` (three standalone instances), `stack` (session: the QIM services on `engines`),
`fresh_stack`, `ops_stack` (session: a supervised private stack).

A failed test that ran on a stack reports its services' last warnings
(tests/failure_logs.py).
"""

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
