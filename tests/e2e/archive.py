"""Helpers of the archive tier's end-to-end tests: a private stack (its own
Redis and Kafka: the archiver and the trimmer act on every conversation of their engines)
with qim-archiver, a keyspace of the shared Cassandra node and a tiny hot window, and
waits on what the tier does."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import secrets
import subprocess
import sys

from qim._core import ids
from qim.stores.redis.keys import CommitKeys
from tests.fixtures import running_stack

# trim what is 1 s old as soon as it is archived (one host: no clock skew allowance)
TINY_HOT_WINDOW = {"QIM_HISTORY_HOT_WINDOW_MS": "1000", "QIM_OUTBOX_RETENTION_MS": "1000",
                   "QIM_HISTORY_TRIM_SLACK_MS": "0", "QIM_HISTORY_TRIM_PERIOD_MS": "200"}


@contextlib.contextmanager
def archive_stack(base, cassandra, extra_env=None, **stack_kw):
    """running_stack with the archive tier on a fresh keyspace of `cassandra` (dropped after)."""
    keyspace = f"qim_e2e_{secrets.token_hex(4)}"
    env = {**cassandra.env(keyspace), **TINY_HOT_WINDOW, **(extra_env or {})}
    try:
        with running_stack(base, extra_env=env, **stack_kw) as st:
            st.keyspace = keyspace
            yield st
    finally:
        drop_keyspace(cassandra, keyspace)


def drop_keyspace(cassandra, keyspace: str) -> None:
    from qim.stores.cql.session import DDL_TIMEOUT_S, CqlSession

    async def run():
        s = CqlSession(cassandra.scylla(keyspace))
        try:
            await s.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", None, "drop keyspace", DDL_TIMEOUT_S)
        finally:
            await s.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # callers may run inside an event loop
        pool.submit(asyncio.run, run()).result()


def redis_client(stack):
    import redis

    host, port = stack.engines.redis_addr.split(":")
    return redis.Redis(host, int(port))


def floor_client(stack, keys: CommitKeys):
    """A client of the Redis instance holding `keys`' commit bucket (the home one when the
    stack runs on one instance; decision 0096's layout otherwise)."""
    import redis

    from qim.dev.redis_instances import layout_of

    es = stack.engines
    layout = layout_of(es.redis_addrs, es.shard_count)
    host, port = layout.core[layout.core_index(keys.bucket)].split(":")
    return redis.Redis(host, int(port))


async def wait_floor(stack, conv: bytes, seq: int, timeout: float = 60.0, tenant: int = 0) -> int:
    """Wait until `conv`'s hot floor reaches `seq` (archived and trimmed); the floor."""
    keys = CommitKeys(tenant, conv)
    r, key = floor_client(stack, keys), keys.floor()
    for _ in range(int(timeout / 0.1)):
        floor = int(r.get(key) or 0)
        if floor >= seq:
            return floor
        await asyncio.sleep(0.1)
    raise AssertionError(f"hot floor of {conv.hex()} stayed at {floor} < {seq} for {timeout} s")


def floor_of(stack, conv: bytes, tenant: int = 0) -> int:
    """The hot floor of `conv` now."""
    keys = CommitKeys(tenant, conv)
    return int(floor_client(stack, keys).get(keys.floor()) or 0)


def qimctl(stack, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """Run qimctl with the stack's client environment (stack.env)."""
    env = {**os.environ, **stack.client_env()}
    return subprocess.run([sys.executable, "-m", "qim.cli.qimctl", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def direct(a: int, b: int) -> bytes:
    """The direct conversation of users a and b (tenant 0)."""
    return ids.conversation_id_direct(0, a, b)
