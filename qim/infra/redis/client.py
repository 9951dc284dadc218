"""Redis connections (docs/design.md §8). Generic plumbing only: key layouts, Lua scripts and
the error table belong to the stores (qim/stores/redis/)."""

from __future__ import annotations

import redis.asyncio as aioredis

from qim.wire.addr import parse_addr


def connect(addr: str, max_connections: int = 64, wait_s: float = 5.0) -> aioredis.Redis:
    """An asyncio Redis client (hiredis parser when installed) for 'host:port'; bytes replies.

    A blocking pool: a call that finds all `max_connections` busy waits up to `wait_s`
    for one (back-pressure) instead of failing with "Too many connections", which
    redis-py's default pool does under load.
    """
    host, port = parse_addr(addr)
    pool = aioredis.BlockingConnectionPool(host=host, port=port, max_connections=max_connections, timeout=wait_s,
                                           socket_connect_timeout=2.0, health_check_interval=30)
    return aioredis.Redis(connection_pool=pool)
