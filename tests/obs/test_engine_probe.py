"""The supervisor's engine probe (qim/obs/engine_probe.py; decision 0091) on a real Redis:
there while it answers PONG, away once killed; Kafka/Cassandra away only when no
listed address accepts."""

from __future__ import annotations

import socket

from qim.obs.engine_probe import engines_away


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_redis_there_then_away(private_redis):
    env = {"QIM_REDIS_ADDR": private_redis.addr}
    assert engines_away(env) is None
    private_redis.kill()
    why = engines_away(env)
    assert why is not None and why.startswith(f"redis {private_redis.addr}: ConnectionRefusedError")


def test_every_redis_instance_of_every_role_must_answer(private_redis):
    # several instances per role (decision 0096): one dead mailbox instance is an engine away
    dead = f"127.0.0.1:{_closed_port()}"
    env = {"QIM_REDIS_ADDR": private_redis.addr, "QIM_REDIS_CORE_ADDRS": private_redis.addr,
           "QIM_REDIS_MAILBOX_ADDRS": f"{private_redis.addr}, {dead}"}
    why = engines_away(env)
    assert why is not None and why.startswith(f"redis {dead}: ConnectionRefusedError")
    assert engines_away({**env, "QIM_REDIS_MAILBOX_ADDRS": private_redis.addr}) is None


def test_one_listening_broker_of_several_is_enough():
    with socket.socket() as live:
        live.bind(("127.0.0.1", 0))
        live.listen()
        dead = _closed_port()
        env = {"QIM_KAFKA_BOOTSTRAP": f"127.0.0.1:{dead},127.0.0.1:{live.getsockname()[1]}"}
        assert engines_away(env) is None
    why = engines_away({"QIM_KAFKA_BOOTSTRAP": f"127.0.0.1:{dead}", "QIM_SCYLLA_ADDRS": "127.0.0.1:1"})
    assert why is not None and why.startswith("no kafka broker reachable")
    assert engines_away({"QIM_SCYLLA_ADDRS": f"127.0.0.1:{dead}"}).startswith("no cassandra node reachable")
