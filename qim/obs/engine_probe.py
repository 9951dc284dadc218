"""Are the engines there? The view the development supervisor and a node under
systemd's watchdog take of them (docs/decisions/0091-an-engine-away-holds-the-health-clock.md,
0092-the-watchdog-waits-for-an-engine.md).

A service at 503 because Redis, every Kafka broker or every Cassandra node is away is
not at fault, and a restart cannot cure it: the supervisor holds its health clock while
`engines_away()` names an engine (qim/dev/healthwatch.py), and a node keeps feeding
systemd's watchdog (qim/obs/watchdog.py). The probe is deliberately
the same few facts a service needs to start: Redis answers PING with PONG (a Redis
replaying its AOF answers -LOADING: away), one of the Kafka bootstrap brokers and one
of the Cassandra nodes accept a TCP connection. A single broker or node down is not an
engine away (the others serve; a service unhealthy then is judged as usual).
"""

from __future__ import annotations

import functools
import socket
from typing import Callable, Mapping, Optional

PROBE_TIMEOUT_S = 1.0


def _hostport(addr: str) -> tuple[str, int]:
    host, _, port = addr.strip().rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def redis_away(addr: str, timeout: float = PROBE_TIMEOUT_S) -> Optional[str]:
    """None when the Redis at `addr` ("host:port") answers PING with +PONG; else why."""
    try:
        with socket.create_connection(_hostport(addr), timeout=timeout) as s:
            s.sendall(b"PING\r\n")
            line = s.recv(128).split(b"\r\n", 1)[0].decode(errors="replace")
    except (OSError, ValueError) as exc:
        return f"redis {addr}: {exc.__class__.__name__}: {exc}"
    if line == "+PONG":
        return None
    if line.startswith("-NOAUTH"):  # a password-protected Redis that answers is there
        return None
    return f"redis {addr}: {line or 'no answer'}"


def any_accepts(kind: str, addrs: str, timeout: float = PROBE_TIMEOUT_S) -> Optional[str]:
    """None when one of the comma-separated `addrs` accepts a TCP connection; else why."""
    errors = []
    for addr in (a for a in addrs.split(",") if a.strip()):
        try:
            with socket.create_connection(_hostport(addr), timeout=timeout):
                return None
        except (OSError, ValueError) as exc:
            errors.append(f"{addr.strip()}: {exc.__class__.__name__}")
    return f"no {kind} reachable ({'; '.join(errors)})" if errors else None


def engines_away(env: Mapping[str, str]) -> Optional[str]:
    """Why the engines named in `env` (a stack's, or a node's own: QIM_REDIS_ADDR,
    QIM_REDIS_CORE_ADDRS, QIM_REDIS_MAILBOX_ADDRS, QIM_REGISTRY_REDIS_ADDR,
    QIM_KAFKA_BOOTSTRAP, QIM_SCYLLA_ADDRS) are away, or None when
    each is there (module doc). Blocking, up to PROBE_TIMEOUT_S per address."""
    checks: list[Callable[[], Optional[str]]] = []
    redis: dict[str, None] = {}  # every Redis instance once (several per role: decision 0096)
    for var in ("QIM_REDIS_ADDR", "QIM_REDIS_CORE_ADDRS", "QIM_REDIS_MAILBOX_ADDRS", "QIM_REGISTRY_REDIS_ADDR"):
        redis.update(dict.fromkeys(a.strip() for a in env.get(var, "").split(",") if a.strip()))
    checks += [functools.partial(redis_away, addr) for addr in redis]
    if env.get("QIM_KAFKA_BOOTSTRAP"):
        checks.append(lambda: any_accepts("kafka broker", env["QIM_KAFKA_BOOTSTRAP"]))
    if env.get("QIM_SCYLLA_ADDRS"):
        checks.append(lambda: any_accepts("cassandra node", env["QIM_SCYLLA_ADDRS"]))
    for check in checks:
        why = check()
        if why:
            return why
    return None
