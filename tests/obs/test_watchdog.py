"""systemd's watchdog protocol of a service node (qim/obs/watchdog.py; docs/decisions/
0074-supervision-acts-on-health.md): READY=1 once healthy, WATCHDOG=1 only while healthy,
STATUS= naming the reason while not. A real node on loopback and a real Unix datagram
socket standing in for systemd's notify socket; no engines."""

from __future__ import annotations

import asyncio
import socket

from qim.obs import watchdog
from tests.obs.test_node import Node

PERIOD_S = 2.0  # WatchdogSec of the test "unit": a ping every 0.5 s while healthy


def _drain(sock: socket.socket) -> list[str]:
    got = []
    while True:
        try:
            got.append(sock.recv(4096).decode())
        except BlockingIOError:
            return got


async def _collect(sock: socket.socket, seconds: float) -> list[str]:
    await asyncio.sleep(seconds)
    return _drain(sock)


async def test_pings_only_while_healthy(tmp_path, monkeypatch):
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.setblocking(False)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    monkeypatch.setenv("WATCHDOG_USEC", str(int(PERIOD_S * 1e6)))
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    node = Node()
    await node.start()
    try:
        starting = await _collect(sock, 1.0)
        assert "READY=1" not in starting and "WATCHDOG=1" not in starting, starting
        assert "STATUS=unhealthy: not ready yet" in starting
        node.ready = True
        healthy = await _collect(sock, 2.0)
        assert healthy.count("READY=1") == 1 and healthy.count("WATCHDOG=1") >= 2, healthy
        assert "STATUS=healthy" in healthy
        node.counter.inc()  # an invariant broken: unhealthy, a live process that must not ping
        await asyncio.sleep(2 * PERIOD_S / watchdog.PINGS_PER_PERIOD)
        _drain(sock)
        unhealthy = await _collect(sock, 2.0)
        assert "WATCHDOG=1" not in unhealthy and "READY=1" not in unhealthy, unhealthy
    finally:
        await node.stop()
        sock.close()


def test_no_socket_no_notification(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert watchdog.sd_notify("READY=1") is False
    monkeypatch.setenv("WATCHDOG_USEC", "30000000")
    monkeypatch.setenv("WATCHDOG_PID", "1")  # another process's watchdog
    assert watchdog.watchdog_period_s() is None
    monkeypatch.delenv("WATCHDOG_PID")
    assert watchdog.watchdog_period_s() == 30.0


async def test_an_engine_away_keeps_the_pings_an_engine_there_does_not(tmp_path, monkeypatch, private_redis):
    # decision 0092: before, a Redis away for WatchdogSec had systemd restart every node
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.setblocking(False)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    monkeypatch.setenv("WATCHDOG_USEC", str(int(PERIOD_S * 1e6)))
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    monkeypatch.setenv("QIM_REDIS_ADDR", private_redis.addr)
    for var in ("QIM_REGISTRY_REDIS_ADDR", "QIM_KAFKA_BOOTSTRAP", "QIM_SCYLLA_ADDRS"):
        monkeypatch.delenv(var, raising=False)
    node = Node()
    node.ready = True
    await node.start()
    try:
        assert "READY=1" in await _collect(sock, 1.5)
        node.ready = False  # unhealthy for its own reason while Redis answers: no pings
        await asyncio.sleep(2 * PERIOD_S / watchdog.PINGS_PER_PERIOD)
        _drain(sock)
        own_fault = await _collect(sock, 2.0)
        assert "WATCHDOG=1" not in own_fault, own_fault
        private_redis.kill()  # unhealthy while Redis is away: the pings go on, the status says why
        await asyncio.sleep(2 * PERIOD_S / watchdog.PINGS_PER_PERIOD + 1.0)
        since_kill = _drain(sock)
        away = await _collect(sock, 2.5)
        assert away.count("WATCHDOG=1") >= 2, away
        assert any(m.startswith(f"STATUS=waiting for an engine: redis {private_redis.addr}: ")
                   and m.endswith("; unhealthy: not ready yet") for m in since_kill + away), since_kill + away
        private_redis.start()  # back, and the node is still unhealthy: its own fault again
        await asyncio.sleep(2 * PERIOD_S / watchdog.PINGS_PER_PERIOD + 1.0)
        _drain(sock)
        back = await _collect(sock, 2.0)
        assert "WATCHDOG=1" not in back, back
    finally:
        await node.stop()
        sock.close()
