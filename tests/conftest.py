"""Shared pytest configuration.

Real-engine fixtures live in tests/fixtures.py (see its docstring; not part of the wheel):
`engines` (session: one private Redis + Kafka), `private_redis`, `private_kafka`,
`private_cassandra`, `shared_cassandra`, `stack` (session: the QIM services on `engines`),
`fresh_stack`, `ops_stack` (session: a supervised private stack).
"""

from tests.fixtures import (  # noqa: F401
    engines,
    fresh_stack,
    ops_stack,
    private_cassandra,
    private_kafka,
    private_redis,
    shared_cassandra,
    stack,
)
