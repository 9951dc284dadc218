"""Shared pytest configuration.

Real-engine fixtures live in tests/fixtures.py (see its docstring; not part of the wheel):
`engines` (session: one private Redis + Kafka), `private_redis`, `private_kafka`,
`private_cassandra`, `shared_cassandra`.
"""

from tests.fixtures import engines, private_cassandra, private_kafka, private_redis, shared_cassandra  # noqa: F401
