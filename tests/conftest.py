"""Shared pytest configuration.

Real-engine fixtures live in qim/dev/testing.py (see its docstring):
`engines` (session: one private Redis + Kafka), `private_redis`, `private_kafka`.
"""

from qim.dev.testing import engines, private_kafka, private_redis  # noqa: F401
