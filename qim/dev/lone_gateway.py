"""A lone `qim-gateway` process for measurements of its client port (the `make perf`
connection step, qim/dev/perf_conn.py; the malformed-connection soak,
tests/gateway/malformed.py).

The development certificates and token key of its own directory, and backends that do
not exist: TLS, AUTH (the token check, the online registry, the connection cap) and
PING need none of them, so what such a gateway spends is the client port's own cost.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from qim.dev._proc import death_wrapper
from qim.dev.certs import CLIENT_PORT, ensure_dev_pki
from qim.dev.devkeys import dev_token_key
from qim.dev.redis_engine import start_redis

START_TIMEOUT_S = 30.0


def free_port() -> int:
    """A TCP port free on the loopback now (an ephemeral one: bind(0)). Not port-for's
    pool on purpose: the stacks and engines of a parallel test pick from that pool, and
    a fixture picking there too took a stack's port between its check and its bind (a
    clean-clone CI run, 2026-12-07). An outgoing connection can still take an ephemeral
    port before the caller binds it (seen once); the caller's bind then fails loudly."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status_kib(pid: int, field: str) -> int:
    """A `kB` field of /proc/PID/status (VmRSS, RssAnon, ...) in KiB. ProcessLookupError
    when the process is gone, KeyError for an unknown field."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name == field:
                    return int(value.split()[0])
    except FileNotFoundError:
        raise ProcessLookupError(f"process {pid} is gone") from None
    raise KeyError(f"/proc/{pid}/status has no {field}")


@dataclass
class LoneGateway:
    """A qim-gateway process of its own: `addr`, `ca_file`, `token_key`, `proc`."""

    addr: str
    ca_file: str
    token_key: str
    proc: subprocess.Popen
    redis: Any = None  # its registry's Redis (a RedisEngine: the node lease), stopped with it

    def rss_mb(self) -> float:
        """The process's resident set size in MiB."""
        return proc_status_kib(self.proc.pid, "VmRSS") / 1024

    def stop(self) -> None:
        """SIGTERM, then wait (SIGKILL after 10 s)."""
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.redis is not None:
            self.redis.stop()


def lone_gateway(base: Path, extra_env: Optional[dict[str, str]] = None) -> LoneGateway:
    """Start qim-gateway under `base` with TLS on its client port and wait until the port
    accepts (RuntimeError with the log's tail when it does not within 30 s). The process
    inherits this one's limits (raise RLIMIT_NOFILE before, for many connections) and
    gets SIGTERM when the calling thread exits (qim.dev._proc.death_wrapper: only the
    main thread may ask)."""
    base.mkdir(parents=True, exist_ok=True)
    pki = ensure_dev_pki(base / "tls")
    key, public = dev_token_key(base)
    client = pki.files(CLIENT_PORT)
    # QIM_GATEWAY_LISTEN of `extra_env` fixes the port (a restart on the same port: benches/reconnect_storm.py)
    addr = (extra_env or {}).get("QIM_GATEWAY_LISTEN") or f"127.0.0.1:{free_port()}"
    dead = {name: f"127.0.0.1:{free_port()}" for name in
            ("QIM_WRITER_ADDRS", "QIM_MAILBOX_ADDRS", "QIM_SESSION_ADDRS", "QIM_KAFKA_BOOTSTRAP")}
    redis = start_redis(base / "redis", die_with_parent=True)  # the gateway's node lease lives there
    env = {**os.environ, **dead, **pki.service_env("gateway"), "QIM_REDIS_ADDR": redis.addr,
           "QIM_GATEWAY_LISTEN": addr, "QIM_GATEWAY_PUSH_ADDR": f"127.0.0.1:{free_port()}",
           "QIM_GATEWAY_METRICS_LISTEN": f"127.0.0.1:{free_port()}", "QIM_REDIS_ALLOW_UNSAFE_DEV": "1",
           "QIM_TOKEN_PUBLIC_KEYS": str(public), "QIM_GATEWAY_TLS_CERT": client.cert,
           "QIM_GATEWAY_TLS_KEY": client.key, **(extra_env or {})}
    log = open(base / "gateway.log", "wb")
    # it dies with this process (SIGTERM or a kill of the soak or the perf step included)
    argv = [*death_wrapper(True), str(Path(sys.executable).with_name("qim-gateway"))]
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()  # the child has its own descriptor
    gateway = LoneGateway(addr, pki.ca_file, str(key), proc, redis)
    host, port = addr.rsplit(":", 1)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection((host, int(port)), 0.5).close()
            return gateway
        except OSError:
            time.sleep(0.1)
    gateway.stop()
    raise RuntimeError(f"qim-gateway did not start: {(base / 'gateway.log').read_text()[-2000:]}")
