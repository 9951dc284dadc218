"""The process shell (qim/app/run.py) as a real process: SIGTERM with live client and
push-link connections ends in exit 0 with no traceback in the log (before issue 11 the
services logged CancelledError and "Task was destroyed but it is pending!" tracebacks on
every stop), a taken port and a bad variable exit with one line, and an install without
the server extra names `pip install 'qim[server]'`. The gateway needs only its
ShardRegistry (a Redis of the test's own) to start; no Kafka."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from qim.dev import lone_gateway
from qim.infra.redis.client import connect
from qim.net.framed import FramedStream
from qim.proto.v1 import connection_pb2, internal_pb2
from qim.protocol import Opcode
from qim.stores.redis.registry import RedisShardRegistry
from qim.wire.devtoken import issue_dev_token
from qim.wire.tokens import SigningKey

ROOT = Path(__file__).resolve().parents[2]
KEY = SigningKey.generate()  # the gateway under test trusts its public half (a file per env)
TRACEBACK_MARKS = ("Traceback", "CancelledError", "Task was destroyed", "Event loop is closed", "never retrieved")


def free_port() -> int:
    return lone_gateway.free_port()  # outside the ephemeral range


_KEY_DIR = tempfile.TemporaryDirectory()  # removed when the test process ends


def public_key_file() -> str:
    path = Path(_KEY_DIR.name) / "token_pub.pem"
    path.write_bytes(KEY.verify_key().public_pem())
    return str(path)


def gateway_env(redis_addr: str = "127.0.0.1:1", **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QIM_")}
    env.update({
        "QIM_REDIS_ADDR": redis_addr, "QIM_KAFKA_BOOTSTRAP": "127.0.0.1:1",
        "QIM_GATEWAY_LISTEN": f"127.0.0.1:{free_port()}", "QIM_GATEWAY_PUSH_ADDR": f"127.0.0.1:{free_port()}",
        "QIM_GATEWAY_METRICS_LISTEN": f"127.0.0.1:{free_port()}", "QIM_TOKEN_PUBLIC_KEYS": public_key_file(),
        "QIM_MAILBOX_ADDRS": "127.0.0.1:1", "PYTHONPATH": str(ROOT),
        # plaintext on loopback: this tests the process shell (TLS: tests/e2e/test_tls_*.py)
        "QIM_GATEWAY_PLAINTEXT_DEV": "1", "QIM_INTERNAL_PLAINTEXT_DEV": "1",
    })
    env.update(extra)
    return env


def start_gateway(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "qim.app", "gateway"], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_healthz(env: dict[str, str], proc: subprocess.Popen, timeout: float = 20.0) -> str:
    url = f"http://{env['QIM_GATEWAY_METRICS_LISTEN']}/healthz"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                return resp.read().decode()
        except urllib.error.HTTPError as exc:  # 503 while the push link is missing: it is up
            return exc.read().decode()
        except OSError:
            time.sleep(0.05)
    raise AssertionError("gateway did not serve /healthz")


def addr(env: dict[str, str], name: str) -> tuple[str, int]:
    host, port = env[name].rsplit(":", 1)
    return host, int(port)


async def mailbox_node_in_registry(redis_addr: str, node_id: str) -> None:
    """A live mailbox node lease in the registry: the gateway waits for its push link."""
    client = connect(redis_addr)
    try:
        assert (await RedisShardRegistry(client).join("mailbox", node_id, "i-1", 600_000, "", "")).joined
    finally:
        await client.aclose()


async def test_sigterm_with_live_connections_exits_0_without_a_traceback(private_redis):
    env = gateway_env(private_redis.addr)
    await mailbox_node_in_registry(private_redis.addr, "mailbox@fake")
    proc = start_gateway(env)
    try:
        for _ in range(100):  # not ready: first joining and reading the registry, then the push link
            if "no push link from mailbox node(s) mailbox@fake" in wait_healthz(env, proc):
                break
            await asyncio.sleep(0.05)
        assert "no push link from mailbox node(s) mailbox@fake" in wait_healthz(env, proc)
        # a device logged in, and a mailbox node's push link that said hello
        reader, writer = await asyncio.open_connection(*addr(env, "QIM_GATEWAY_LISTEN"))
        device = FramedStream(reader, writer)
        token = issue_dev_token(KEY, 0, 7, 1)
        device.send(Opcode.AUTH, 1, connection_pb2.Auth(token=token).SerializeToString())
        assert (await asyncio.wait_for(device.read_frame(), 10))[0] == Opcode.AUTH_OK
        reader, writer = await asyncio.open_connection(*addr(env, "QIM_GATEWAY_PUSH_ADDR"))
        link = FramedStream(reader, writer)
        link.send(Opcode.PUSH_BATCH, 0, internal_pb2.PushBatch(hello=True, node_id="mailbox@fake",
                                                                shards=[0]).SerializeToString())
        await link.flush()
        for _ in range(100):
            if wait_healthz(env, proc) == "ok\n":
                break
            await asyncio.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.get_running_loop().run_in_executor(None, lambda: proc.communicate(timeout=20))
        try:
            tail = await asyncio.wait_for(device.read_frame(), 5)
        except ConnectionError:  # a reset instead of a FIN is a close too
            tail = None
        assert tail is None  # the device sees the connection close
        device.abort()
        link.abort()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert not [mark for mark in TRACEBACK_MARKS if mark in err], err
    assert "stopping" in err and "stopped" in err


def test_a_taken_port_exits_3_with_one_line(private_redis):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        env = gateway_env(private_redis.addr, QIM_GATEWAY_LISTEN="127.0.0.1:%d" % taken.getsockname()[1])
        proc = start_gateway(env)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, err
    lines = [line for line in err.splitlines() if line.startswith("qim-gateway:")]
    assert len(lines) == 1 and "cannot start: cannot listen" in lines[0]
    assert "Traceback" not in err


def test_an_unreachable_registry_exits_3_with_one_line():
    proc = start_gateway(gateway_env("127.0.0.1:1"))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, err
    lines = [line for line in err.splitlines() if line.startswith("qim-gateway:")]
    assert len(lines) == 1 and "cannot start" in lines[0] and "Traceback" not in err


def test_a_bad_variable_exits_2_naming_it():
    proc = start_gateway(gateway_env(QIM_GATEWAY_LISTEN="nonsense"))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "QIM_GATEWAY_LISTEN" in err and "Traceback" not in err


def test_without_the_server_extra_a_service_names_the_pip_command():
    # an app-only install: the server extra's modules are missing
    blocked = "redis", "hiredis", "confluent_kafka", "prometheus_client", "pyroaring", "numpy"
    code = ("import sys\n"
            f"for m in {blocked!r}: sys.modules[m] = None\n"
            "from qim.app.main import main\n"
            "main('writer')\n")
    proc = subprocess.run([sys.executable, "-c", code], env=gateway_env(), cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr.strip().count("\n") == 0, proc.stderr  # one line
    assert "pip install 'qim[server]'" in proc.stderr and "qim-writer" in proc.stderr
