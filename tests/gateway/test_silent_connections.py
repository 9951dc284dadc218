"""Connections whose path went silent are reaped, and never lock a user's live devices
out (issue 33 item 7; docs/decisions/0077-silent-connections-reaped.md).

A real qim-gateway (qim/dev/lone_gateway.py: TLS on its client port, its own Redis)
with a short heartbeat (QIM_GATEWAY_HEARTBEAT_S=4: silent connections are closed after
6 s, evictable at the per-user cap after 4 s). Frozen devices reach it through a TCP
proxy that stops forwarding (tests/sdk/faultproxy.py `cut()`: a NAT that forgot them,
a laptop that slept: no FIN, no RST); live devices connect directly and PING every
second, as the SDKs do at half the heartbeat. Before the fix the frozen connections
stayed counted online for ever and their user's next devices got RATE_LIMITED (retry
in 60 s) for as long as the test waited.
"""

from __future__ import annotations

import asyncio
import subprocess
import time

import pytest

from qim.dev.lone_gateway import free_port, lone_gateway
from qim.errors import ErrorCode
from qim.proto.v1 import connection_pb2
from qim.protocol import Opcode
from tests.gateway.rawdevice import Device, metric, poll
from tests.sdk.faultproxy import FaultProxy

HEARTBEAT_S = 4
CAP = 3


@pytest.fixture
def gateway(tmp_path):
    metrics = f"127.0.0.1:{free_port()}"
    gw = lone_gateway(tmp_path / "gw", {"QIM_GATEWAY_HEARTBEAT_S": str(HEARTBEAT_S),
                                        "QIM_MAX_CONNECTIONS_PER_USER": str(CAP),
                                        "QIM_GATEWAY_METRICS_LISTEN": metrics})
    gw.metrics = metrics
    yield gw
    gw.stop()


async def test_frozen_connections_are_reaped_and_live_ones_stay(gateway):
    proxy = FaultProxy(gateway.addr)
    via = await proxy.start()
    live, _ = await Device.login(gateway, gateway.addr, 501, 1)
    live.keep_alive()
    frozen = [(await Device.login(gateway, via, 502, d))[0] for d in (1, 2, 3)]
    try:
        assert await asyncio.to_thread(metric, gateway, "qim_gateway_online_devices") == 4
        proxy.cut()  # the path stops forwarding: no FIN, no RST reaches the gateway
        await poll(lambda: metric(gateway, "qim_gateway_online_devices") == 1, 60,
                   "the 3 frozen connections reaped (online gauge 4 -> 1)")
        assert metric(gateway, 'qim_gateway_silent_closed_total{reason="silent"}') == 3
        await asyncio.sleep(HEARTBEAT_S)  # the live device, PINGing, is still served
        live.send(Opcode.PING, 7, connection_pb2.Ping())
        assert (await live.reply(7))[0] == Opcode.PONG
        assert await asyncio.to_thread(metric, gateway, "qim_gateway_online_devices") == 1
    finally:
        live.close()
        for dev in frozen:
            dev.close()
        await proxy.stop()


async def test_a_user_with_frozen_connections_still_connects_new_devices(gateway):
    proxy = FaultProxy(gateway.addr)
    via = await proxy.start()
    user = 601
    frozen = [(await Device.login(gateway, via, user, d))[0] for d in (1, 2, 3)]  # the cap
    proxy.cut()
    live: list[Device] = []
    try:
        started = time.monotonic()
        for device in (4, 5, 6):  # three live devices of the same user, each retrying as told
            while True:
                dev, err = await Device.login(gateway, gateway.addr, user, device)
                if dev is not None:
                    dev.keep_alive()
                    live.append(dev)
                    break
                assert err.code == ErrorCode.RATE_LIMITED, err
                assert time.monotonic() - started < 40, f"device {device} still locked out: {err.message}"
                await asyncio.sleep(min(err.retry_after_ms / 1000, 5.0))
        assert await asyncio.to_thread(metric, gateway, "qim_gateway_online_devices") == 3
        for i, dev in enumerate(live):
            dev.send(Opcode.PING, 50 + i, connection_pb2.Ping())
            assert (await dev.reply(50 + i))[0] == Opcode.PONG
    finally:
        for dev in live + frozen:
            dev.close()
        await proxy.stop()


async def test_accepted_sockets_carry_tcp_keepalive(gateway):
    dev, _ = await Device.login(gateway, gateway.addr, 701, 1)
    try:
        port = gateway.addr.rsplit(":", 1)[1]

        def timers() -> str:  # ss shows one timer: the retransmission one while bytes are unacknowledged
            return subprocess.run(["ss", "-tnoH", "state", "established", f"( sport = :{port} )"],
                                  capture_output=True, text=True, check=True).stdout

        # the kernel's keepalive timer runs on the gateway's side of the connection
        await poll(lambda: "timer:(keepalive" in timers(), 20, f"a keepalive timer: {timers()!r}")
    finally:
        dev.close()
