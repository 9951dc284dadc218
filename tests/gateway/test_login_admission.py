"""A login surge is admitted at the rate the gateway verifies logins, and the logins it
cannot take are told when to come back, spread (issue 33 item 5;
docs/decisions/0078-login-admission.md).

A real qim-gateway (qim/dev/lone_gateway.py, its own Redis: a login's session epoch
and revocation check are Redis round trips) with one login slot and a queue of 8
(QIM_GATEWAY_LOGINS_INFLIGHT=1, QIM_GATEWAY_LOGIN_QUEUE=8). 40 TLS connections are
opened first, then all 40 send their AUTH at once, as the devices of a restarted
gateway do. Before the fix every AUTH was served at once (no refusal, all 40 in
flight together); now the ones past the queue get ERROR(UNAVAILABLE) with a
retry_after_ms that places each in line behind those before it, and every device
that waits its hint gets in (how many returns that takes is a speed figure: the
bench, benches/reconnect_storm.py).
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from qim.dev.lone_gateway import free_port, lone_gateway
from qim.errors import ErrorCode
from tests.gateway.rawdevice import Device, metric

DEVICES = 40


@pytest.fixture
def gateway(tmp_path):
    metrics = f"127.0.0.1:{free_port()}"
    # a long AUTH timeout: the 40 connections are opened first, a few at a time, on a busy machine
    gw = lone_gateway(tmp_path / "gw", {"QIM_GATEWAY_LOGINS_INFLIGHT": "1", "QIM_GATEWAY_LOGIN_QUEUE": "8",
                                        "QIM_AUTH_TIMEOUT_MS": "300000", "QIM_GATEWAY_METRICS_LISTEN": metrics})
    gw.metrics = metrics
    yield gw
    gw.stop()


async def test_a_login_surge_is_refused_past_the_queue_with_spread_hints_and_everyone_gets_in(gateway):
    opening = asyncio.Semaphore(8)

    async def open_one() -> Device:
        async with opening:
            return await Device.open(gateway, gateway.addr)

    devices = await asyncio.gather(*(open_one() for _ in range(DEVICES)))
    for i, dev in enumerate(devices):  # every AUTH of the surge leaves in the same instant
        dev.send_auth(gateway, 800 + i, 1)
    results = await asyncio.gather(*(dev.auth_reply() for dev in devices))
    refused = [(i, err) for i, (ok, err) in enumerate(results) if ok is None]
    assert refused, "every AUTH of the surge was served at once: no admission"
    assert all(err.code == ErrorCode.UNAVAILABLE and err.retry_after_ms > 0 for _, err in refused), refused[:3]
    hints = [err.retry_after_ms for _, err in refused]
    assert len(set(hints)) > len(hints) // 2, f"the refused were told to come back together: {hints}"
    assert await asyncio.to_thread(metric, gateway, "qim_gateway_login_refused_total") == len(refused)

    # each refused device waits its hint, as the SDKs do, and comes back
    live = [ok for ok, _ in results if ok is not None]
    tries = {i: 1 for i, _ in refused}
    started = time.monotonic()

    async def come_back(i: int, hint_ms: int) -> None:
        while True:
            await asyncio.sleep(hint_ms / 1000)
            assert time.monotonic() - started < 180, f"device {i} still refused after {tries[i]} tries"
            tries[i] += 1
            try:
                ok, err = await Device.login(gateway, gateway.addr, 800 + i, 1)
            except OSError:  # closed before TLS: more handshakes parked than the backlog (handshakes.py)
                hint_ms = random.randint(500, 1500)  # the SDK's jittered backoff
                continue
            if ok is not None:
                live.append(ok)
                return
            assert err.code == ErrorCode.UNAVAILABLE, err
            hint_ms = err.retry_after_ms

    try:
        await asyncio.gather(*(come_back(i, err.retry_after_ms) for i, err in refused))
        assert len(live) == DEVICES
        assert await asyncio.to_thread(metric, gateway, "qim_gateway_online_devices") == DEVICES
    finally:
        for dev in live:
            dev.close()
