"""Nodes warm their message path before they report ready (issue 41's cold start,
docs/perf.md "Round seven: the cold start"): the writer's Outbox producer and the
fanout's dispatch producer ask for their own metadata of their topic in `setup()`, and
every store's scripts are loaded by the store check. A warm-up that fails fails the
start (EngineError or the typed store error, the node stopped, never ready): a warm-up
never hides an error. Real Redis (private, AOF always); no broker: its failures are the
point here (tests/infra/test_kafka_bridge.py has the broker's side)."""

from __future__ import annotations

import socket

import pytest

from qim.config import Env, FanoutConfig, WriterConfig
from qim.errors import EngineError
from qim.infra.kafka.bridge import AsyncProducer
from qim.stores.errors import StorageError
from qim.stores.redis.backend import RedisBackend


def dead_addr() -> str:
    """A loopback address nothing listens on (a port free now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def env_of(redis_addr: str, service: str) -> Env:
    """Plaintext development settings of one `service` node over `redis_addr`, a dead broker."""
    up = service.upper()
    return Env({"QIM_REDIS_ADDR": redis_addr, "QIM_KAFKA_BOOTSTRAP": dead_addr(), "QIM_INTERNAL_PLAINTEXT_DEV": "1",
                "QIM_REDIS_ALLOW_UNSAFE_DEV": "1", f"QIM_{up}_METRICS_LISTEN": dead_addr(),
                **({"QIM_WRITER_LISTEN": dead_addr()} if service == "writer" else {})})


def refusing_warm(monkeypatch) -> list:
    """AsyncProducer.warm replaced by one that records (producer, topic) and refuses."""
    calls: list = []

    async def warm(self, topic: str, timeout: float = 5.0) -> int:
        calls.append((self, topic))
        raise EngineError(f"warm-up of {topic} refused (test)")

    monkeypatch.setattr(AsyncProducer, "warm", warm)
    return calls


async def test_a_producer_warm_up_refuses_an_unreachable_broker():
    producer = AsyncProducer(dead_addr())
    try:
        with pytest.raises(EngineError, match="producer metadata of qim.outbox failed"):
            await producer.warm("qim.outbox", timeout=0.5)
    finally:
        await producer.close(timeout=0.5)


async def test_a_writer_whose_outbox_warm_up_fails_never_reports_ready(private_redis, monkeypatch):
    from qim.services.writer.server import ConversationWriter

    calls = refusing_warm(monkeypatch)
    writer = ConversationWriter(WriterConfig.from_env(env_of(private_redis.addr, "writer")))
    with pytest.raises(EngineError, match="warm-up of qim.outbox refused"):
        await writer.start()
    assert calls == [(writer.producer, "qim.outbox")]  # its own producer, the one sends use
    assert "starting" in list(writer.health())


async def test_a_fanout_whose_dispatch_warm_up_fails_never_reports_ready(private_redis, monkeypatch):
    from qim.services.fanout import node as fanout_node

    async def one_partition(bootstrap: str, topic: str, timeout: float = 10.0) -> int:
        return 1  # the Outbox count is read before the warm-up (by another client)

    monkeypatch.setattr(fanout_node, "topic_partitions", one_partition)
    calls = refusing_warm(monkeypatch)
    fanout = fanout_node.FanoutNode(FanoutConfig.from_env(env_of(private_redis.addr, "fanout")))
    with pytest.raises(EngineError, match="warm-up of qim.dispatch refused"):
        await fanout.start()
    assert [topic for _, topic in calls] == ["qim.dispatch"]
    assert "starting" in list(fanout.health())


async def test_the_store_check_loads_every_script_and_a_refused_script_fails_it(private_redis):
    backend = RedisBackend(private_redis.addr)
    try:
        scripts = list(backend.topology._scripts.values())
        shas = [s.sha for group in scripts for s in group._scripts.values()]
        assert shas and not any(await backend.client.script_exists(*shas))  # a fresh Redis: none cached
        await backend.check(commit_facts=True, allow_unsafe_dev=True)
        assert all(await backend.client.script_exists(*shas))  # the first messages meet no NOSCRIPT
        await backend.client.script_flush()
        broken = next(iter(scripts[0]._scripts.values()))
        broken.script = "this is not lua ("
        with pytest.raises(StorageError, match="SCRIPT LOAD"):
            await backend.check(commit_facts=True, allow_unsafe_dev=True)
    finally:
        await backend.close()
