"""A private development Redis with the durability settings of docs/design.md §8.

Every instance holds commit facts or mailboxes in the development stack, so each runs
with `appendfsync always` and `noeviction` (ENGINES.md, "Redis"); several standalone
instances (`qim-dev engines up --redis-instances N`, docs/decisions/0096 and 0098) are
`redis_instance(dir, ports, index)`, each in its own directory on its own port.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import redis

from qim.dev._proc import apt_install, pick_ports, require_executable
from qim.dev.engine import Engine
from qim.errors import EngineError

log = logging.getLogger(__name__)

# Settings checked by tests and by the services' start-up persistence checks.
REDIS_SETTINGS = {
    "appendonly": "yes",
    "appendfsync": "always",
    "no-appendfsync-on-rewrite": "no",
    "maxmemory-policy": "noeviction",
    "save": '""',
    # LATENCY LATEST then names what held the event loop (an fsync, a script, the fork)
    # for 100 ms or more: the first question when every node's call times out at once
    "latency-monitor-threshold": "100",
}


def ensure_redis_installed() -> str:
    """Path of `redis-server`, installing the Debian package if it is missing.

    Raises EngineError if apt-get fails or is not allowed (not root).
    """
    if not shutil.which("redis-server"):
        log.info("redis-server not found; installing it from Debian")
        apt_install(["redis-server"])
    return require_executable("redis-server")


class RedisEngine(Engine):
    """Private Redis in `dir` on 127.0.0.1:`port` (AOF always, noeviction).

    `.addr` is "127.0.0.1:PORT"; `.stop()/.kill()/.restart()` from `Engine`.
    Data lives in `dir` (appendonlydir/), so a restart replays the AOF.
    """

    name = "redis"
    start_timeout = 20.0

    @property
    def port(self) -> int:
        """The Redis port."""
        return self.ports["main"]

    def client(self, **kw) -> redis.Redis:
        """A redis-py client for this instance (short timeouts for dev use)."""
        kw.setdefault("socket_timeout", 5)
        kw.setdefault("socket_connect_timeout", 1)
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)

    def _prepare(self) -> None:
        # a config file (not argv) so that restart() brings back the same settings
        lines = [
            f"port {self.port}",
            "bind 127.0.0.1",
            "protected-mode yes",
            f"dir {self.dir}",
            f"pidfile {self.dir / 'redis.pid'}",
            "daemonize no",  # we hold the pid ourselves; --daemonize would fork away
            'logfile ""',
            "loglevel warning",
            *(f"{k} {v}" for k, v in REDIS_SETTINGS.items()),
        ]
        (self.dir / "redis.conf").write_text("\n".join(lines) + "\n")

    def _command(self) -> list[str]:
        return [ensure_redis_installed(), str(self.dir / "redis.conf")]

    def _check_ready(self) -> bool:
        """PING answers and INFO persistence says the dataset is loaded.

        While Redis replays the AOF it refuses most commands with -LOADING (redis-py:
        BusyLoadingError, raised here). INFO is served during loading, and `loading:0`
        (plus `async_loading:0`, a replica loading in the background while it serves
        old data) is the positive proof that every acknowledged write is back.
        """
        c = self.client(socket_timeout=1, decode_responses=True)
        try:
            if not c.ping():
                return False
            info = c.info("persistence")
            return int(info.get("loading", 1)) == 0 and int(info.get("async_loading", 0)) == 0
        finally:
            c.close()


def instance_name(index: int) -> str:
    """The name of the index-th (0-based) instance of a set: "redis", "redis2", "redis3",
    ... (the first keeps the name a one-instance set always had: its state, its rows)."""
    return "redis" if index == 0 else f"redis{index + 1}"


def redis_instance(dir: Path | str, ports: dict[str, int], index: int = 0, pid: int | None = None,
                   die_with_parent: bool = False) -> RedisEngine:
    """The index-th RedisEngine of a set (not started), named by instance_name(index)."""
    eng = RedisEngine(Path(dir), ports, pid, die_with_parent=die_with_parent)
    eng.name = instance_name(index)
    return eng


def start_redis(dir: Path | str, port: int | None = None, timeout: float | None = None,
                die_with_parent: bool = False) -> RedisEngine:
    """Start a private Redis under `dir` (created) and wait for PING.

    `port` defaults to a free one. Returns the running RedisEngine.
    Raises EngineError (with the tail of the Redis log) if it cannot start.
    """
    ensure_redis_installed()
    eng = RedisEngine(Path(dir), {"main": port or pick_ports(1)[0]},
                      die_with_parent=die_with_parent)
    try:
        return eng.start(timeout)
    except OSError as e:
        raise EngineError(f"redis: cannot start in {dir}: {e}") from e
