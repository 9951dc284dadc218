"""Shared pytest configuration.

Real-engine fixtures live in qim/dev/testing.py (see its docstring):
`engines` (session: one private Redis + Kafka), `private_redis`, `private_kafka`,
`private_cassandra`.
"""

from qim.dev.testing import (engines, private_cassandra, private_kafka,  # noqa: F401
                             private_redis)
