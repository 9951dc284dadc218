"""A live device on a slow path is never evicted nor reaped (docs/decisions/0095).

A real qim-gateway (qim/dev/lone_gateway.py) with a 2 s heartbeat: it reaps a connection
it read nothing from for 3 s and, at the user's cap (here 1), closes one silent for more
than 2 s to admit a new device (decision 0077). The SDK's connection reaches it through
tests/sdk/faultproxy.py delaying every chunk 1 s each way: a PING's round trip takes
2 s. A second device of the same user asks to log in every 0.3 s for 20 s; each must be
refused (RATE_LIMITED) because the SDK's connection is never silent for a heartbeat.
Before the fix the SDK sent its next PING half a heartbeat after the previous PONG, a
frame every ~3 s, so the contender was admitted by evicting it (or the sweep reaped it).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from qim.dev.lone_gateway import free_port, lone_gateway
from qim.errors import ErrorCode
from qim.sdk.connection import Connection, client_tls
from qim.wire.devtoken import issue_dev_token
from tests.gateway.rawdevice import Device, metric
from tests.sdk.faultproxy import FaultProxy

HEARTBEAT_S = 2
USER = 9501


@pytest.fixture
def gateway(tmp_path):
    metrics = f"127.0.0.1:{free_port()}"
    gw = lone_gateway(tmp_path / "gw", {"QIM_GATEWAY_HEARTBEAT_S": str(HEARTBEAT_S),
                                        "QIM_MAX_CONNECTIONS_PER_USER": "1",
                                        "QIM_GATEWAY_METRICS_LISTEN": metrics})
    gw.metrics = metrics
    yield gw
    gw.stop()


async def test_a_live_device_on_a_slow_path_keeps_its_connection(gateway):
    proxy = FaultProxy(gateway.addr, delay_s=1.0)  # a PING's round trip: 2 s, a whole heartbeat
    via = await proxy.start()
    conn = await Connection.open(via, issue_dev_token(gateway.token_key, 0, USER, 1),
                                 tls=client_tls(via, ca_file=gateway.ca_file))
    assert conn.auth.heartbeat_s == HEARTBEAT_S
    # the runtime's interval (qim/sdk/runtime.py): half the heartbeat the gateway told
    beat = asyncio.get_running_loop().create_task(conn.heartbeat(max(1.0, conn.auth.heartbeat_s / 2)))
    try:
        # the steady state: right after AUTH_OK the gateway hears the device's first frame
        # one round trip (here a whole heartbeat) after its reply, a gap no client can close
        # (it may not speak before AUTH_OK); from its first PONG on, a frame every interval
        await conn.ping()
        until = time.monotonic() + 20
        attempts = 0
        while time.monotonic() < until:
            contender, err = await Device.login(gateway, gateway.addr, USER, 2)
            attempts += 1
            if contender is not None:
                contender.close()
            assert contender is None, f"attempt {attempts}: the live slow device was evicted for a new login"
            assert err.code == ErrorCode.RATE_LIMITED, err
            assert conn.is_open, f"the SDK's connection ended: {conn.closed.result()}"
            await asyncio.sleep(0.3)
        assert await asyncio.to_thread(metric, gateway, "qim_gateway_silent_closed_total") == 0
        assert await asyncio.to_thread(metric, gateway, "qim_gateway_online_devices") == 1
        await conn.ping()  # still served after 20 s
        assert conn.is_open and not beat.done()
    finally:
        beat.cancel()
        await conn.close()
        await proxy.stop()
