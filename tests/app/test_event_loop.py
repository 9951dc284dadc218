"""The services' event loop (qim/app/run.py): uvloop by default,
QIM_EVENT_LOOP=asyncio opts out, any other value exits 2 naming the variable. Real
gateway processes on a Redis of the test's own (the gateway's ShardRegistry, as in test_run.py)."""

from __future__ import annotations

import signal
import time

import pytest

from tests.app.test_run import gateway_env, start_gateway, wait_healthz


def _started_line(env: dict[str, str]) -> str:
    proc = start_gateway(env)
    try:
        deadline = time.monotonic() + 20
        while wait_healthz(env, proc) != "ok\n":  # started: joined the registry, listening
            assert time.monotonic() < deadline, wait_healthz(env, proc)
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    started = [line for line in err.splitlines() if "started (event loop:" in line]
    assert len(started) == 1, err
    return started[0]


@pytest.mark.parametrize("value, loop", [(None, "uvloop"), ("asyncio", "asyncio"), ("uvloop", "uvloop")])
def test_the_service_runs_on_the_loop_chosen(value, loop, private_redis):
    env = gateway_env(private_redis.addr) if value is None else gateway_env(private_redis.addr, QIM_EVENT_LOOP=value)
    assert _started_line(env).endswith(f"started (event loop: {loop})")


def test_an_unknown_loop_exits_2_naming_the_variable():
    proc = start_gateway(gateway_env(QIM_EVENT_LOOP="trio"))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2, err
    assert "QIM_EVENT_LOOP" in err and "uvloop, asyncio" in err and "Traceback" not in err
