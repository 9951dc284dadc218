"""Development supervisor: runs qim-writer, qim-mailbox, qim-session, qim-fanout and
qim-gateway as separate processes against engines started by `qim-dev engines up`.

Each service gets free loopback ports, its own log file under DIR/logs and its pid in
DIR/stack.json; `down` stops exactly those pids. `up` waits until every /healthz
answers 200 and writes DIR/stack.env: everything a client or admin command needs
(gateway address, development token secret, writer addresses, engine addresses).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from qim.dev._proc import _death_wrapper, free_ports
from qim.errors import EngineError



def module_of(name: str) -> str:
    """Instance name -> entry module: "writer2" runs qim.app.writer."""
    return name.rstrip("0123456789")
READY_TIMEOUT_S = 60.0
# copied into stack.env so qim-loadgen and qimctl work after sourcing one file
CLIENT_VARS = ("QIM_WRITER_ADDRS", "QIM_REDIS_ADDR", "QIM_KAFKA_BOOTSTRAP", "QIM_MAILBOX_SHARD_COUNT", "QIM_TENANT_ID")


@dataclass
class Stack:
    """A running (or recorded) set of service processes."""

    dir: Path
    env: dict[str, str]
    metrics: dict[str, str]
    pids: dict[str, int] = field(default_factory=dict)
    die_with_parent: bool = False  # test runs: services get SIGTERM when pytest dies
    instance_env: dict[str, dict[str, str]] = field(default_factory=dict)  # per-instance overrides

    @property
    def gateway_addr(self) -> str:
        return self.env["QIM_GATEWAY_LISTEN"]

    @property
    def token_secret(self) -> str:
        return self.env["QIM_DEV_TOKEN_SECRET"]

    def save(self) -> None:
        (self.dir / "stack.json").write_text(json.dumps(
            {"env": self.env, "metrics": self.metrics, "pids": self.pids, "instance_env": self.instance_env},
            indent=2))
        client_env = {"QIM_GATEWAY_ADDR": self.gateway_addr, "QIM_DEV_TOKEN_SECRET": self.token_secret}
        client_env.update({k: self.env[k] for k in CLIENT_VARS if k in self.env})
        (self.dir / "stack.env").write_text("".join(f"{k}={v}\n" for k, v in client_env.items()))

    @classmethod
    def load(cls, dir: Path) -> Optional["Stack"]:
        path = Path(dir) / "stack.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        return cls(Path(dir), data["env"], data["metrics"], {k: int(v) for k, v in data["pids"].items()},
                   instance_env=data.get("instance_env", {}))

    @property
    def names(self) -> list[str]:
        return list(self.metrics)

    def start_service(self, name: str, extra_env: Optional[dict[str, str]] = None) -> int:
        """Start one service instance (again), optionally with extra environment (fault
        injection); returns its pid."""
        logs = self.dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env, **self.instance_env.get(name, {}), **(extra_env or {}),
               "PYTHONUNBUFFERED": "1"}
        with open(logs / f"{name}.log", "ab") as log:
            argv = _death_wrapper(self.die_with_parent) + [sys.executable, "-m", f"qim.app.{module_of(name)}"]
            proc = subprocess.Popen(argv, env=env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True, cwd=self.dir)
        self.pids[name] = proc.pid
        self.save()
        return proc.pid

    def healthz(self, name: str) -> tuple[int, str]:
        """(HTTP status, body) of a service's /healthz; (0, reason) when unreachable."""
        try:
            with urllib.request.urlopen(f"http://{self.metrics[name]}/healthz", timeout=1.0) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except (urllib.error.URLError, OSError) as exc:
            return 0, str(exc)

    def alive(self, name: str) -> bool:
        pid = self.pids.get(name)
        if not pid:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        # A zombie child of this process still "exists"; reap it if it is ours.
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            return done == 0
        except ChildProcessError:
            return True

    def wait_ready(self, names=None, timeout: float = READY_TIMEOUT_S) -> None:
        """Block until every named /healthz is 200. EngineError (with log tail) otherwise."""
        deadline = time.monotonic() + timeout
        pending = list(names or self.names)
        while pending:
            name = pending[0]
            if not self.alive(name):
                raise EngineError(f"{name} exited during start:\n{self.log_tail(name)}")
            status, body = self.healthz(name)
            if status == 200:
                pending.pop(0)
                continue
            if time.monotonic() > deadline:
                raise EngineError(f"{name} not ready after {timeout}s ({status} {body.strip()}):\n{self.log_tail(name)}")
            time.sleep(0.2)

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.dir / "logs" / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(no log)"

    def stop_service(self, name: str, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        """Stop exactly the recorded pid (SIGKILL after timeout)."""
        pid = self.pids.get(name)
        if not pid or not self.alive(name):
            return
        os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while self.alive(name) and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.alive(name):
            os.kill(pid, signal.SIGKILL)
            while self.alive(name):
                time.sleep(0.05)

    def kill_service(self, name: str) -> None:
        """SIGKILL, for crash tests."""
        self.stop_service(name, signal.SIGKILL, 5.0)

    def down(self) -> None:
        for name in reversed(self.names):
            self.stop_service(name)
        (self.dir / "stack.json").unlink(missing_ok=True)
        (self.dir / "stack.env").unlink(missing_ok=True)  # a stale file would point at dead ports


def stack_up(dir: Path, engine_env: dict[str, str], extra_env: Optional[dict[str, str]] = None,
             die_with_parent: bool = False, writers: int = 1, mailboxes: int = 1, sessions: int = 1) -> Stack:
    """Start every service on fresh loopback ports — `writers` writer instances (writer,
    writer2, ...), `mailboxes` mailbox nodes (mailbox, mailbox2, ...; shards split by
    static assignment) and `sessions` session nodes (session, session2, ...; user u on
    node u mod n) — and wait until all are healthy. EngineError when one cannot start."""
    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=True)
    ports = iter(f"127.0.0.1:{p}" for p in free_ports(4 + 2 * (writers + mailboxes + sessions)))
    env = {
        **engine_env,
        "QIM_GATEWAY_LISTEN": next(ports), "QIM_GATEWAY_PUSH_ADDR": next(ports),
        "QIM_GATEWAY_METRICS_LISTEN": next(ports), "QIM_FANOUT_METRICS_LISTEN": next(ports),
        "QIM_DEV_TOKEN_SECRET": secrets.token_hex(16), "QIM_MAILBOX_NODE_COUNT": str(mailboxes),
    }
    env.update(extra_env or {})
    instance_env: dict[str, dict[str, str]] = {}
    for i in range(writers):
        instance_env["writer" if i == 0 else f"writer{i + 1}"] = {
            "QIM_WRITER_LISTEN": next(ports), "QIM_WRITER_METRICS_LISTEN": next(ports)}
    for i in range(mailboxes):
        instance_env["mailbox" if i == 0 else f"mailbox{i + 1}"] = {
            "QIM_MAILBOX_LISTEN": next(ports), "QIM_MAILBOX_METRICS_LISTEN": next(ports),
            "QIM_MAILBOX_NODE_INDEX": str(i)}
    for i in range(sessions):
        instance_env["session" if i == 0 else f"session{i + 1}"] = {
            "QIM_SESSION_LISTEN": next(ports), "QIM_SESSION_METRICS_LISTEN": next(ports),
            "QIM_SESSION_NODE_INDEX": str(i)}
    env["QIM_SESSION_ADDRS"] = ",".join(e["QIM_SESSION_LISTEN"] for n, e in instance_env.items() if n.startswith("s"))
    env["QIM_WRITER_ADDRS"] = ",".join(e["QIM_WRITER_LISTEN"] for n, e in instance_env.items() if n.startswith("w"))
    env["QIM_MAILBOX_ADDRS"] = ",".join(e["QIM_MAILBOX_LISTEN"] for n, e in instance_env.items() if n.startswith("m"))
    metrics = {n: next(v for k, v in e.items() if k.endswith("_METRICS_LISTEN")) for n, e in instance_env.items()}
    metrics.update({"gateway": env["QIM_GATEWAY_METRICS_LISTEN"], "fanout": env["QIM_FANOUT_METRICS_LISTEN"]})
    stack = Stack(dir, env, metrics, die_with_parent=die_with_parent, instance_env=instance_env)
    try:
        for name in stack.names:
            stack.start_service(name)
        stack.wait_ready()
    except BaseException:
        stack.down()
        raise
    return stack
