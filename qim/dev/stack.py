"""Development supervisor: runs every process of the service table (qim/topology.py:
qim-writer, qim-mailbox, qim-session, qim-room, qim-gateway, qim-fanout, and qim-archiver
with the archive tier) as separate processes against engines started by `qim-dev engines up`,
laid out by qim.dev.stack_layout (any number of nodes per kind; one each by default).

Each service gets loopback ports (fresh, or remembered in a PortBook file: see
qim.dev.stack_ports), its own log file under DIR/logs and its pid in DIR/stack.json;
`down` stops exactly those pids. `up` waits until every /healthz answers 200 and
writes DIR/stack.env: everything a client or admin command needs (gateway address,
the development token key's path and the token audience, writer addresses, engine
addresses). The development token key is generated once per stack directory
(qim.dev.devkeys); the gateway trusts its public half (QIM_TOKEN_PUBLIC_KEYS).

Everything runs over TLS (docs/decisions/0022): a development CA and certificates are made once
under DIR/tls (qim.dev.certs; remade when they expire), the gateway's client port gets
the `client-port` certificate, every service its own service certificate for mutual TLS,
and stack.env carries QIM_CA_FILE for clients and qimctl's certificate.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional

from mirakuru.exceptions import ProcessExitedWithError, ProcessFinishedWithError

from qim.consts import WS_PATH
from qim.dev import progress
from qim.dev._proc import Launcher, death_wrapper, pid_alive, pid_cwd, stop_pid
from qim.dev.certs import DevPki
from qim.dev.devkeys import KEY_FILE as DEV_KEY_FILE
from qim.dev.stack_env import CLIENT_VARS, DEPLOYMENT_FILE, TLS_DIR, plan_stack
from qim.dev.stack_layout import kind_of
from qim.dev.stack_race import PORT_RACE_RETRIES, PortTaken, foreign_pid, port_race
from qim.errors import EngineError
from qim.net.tls import TlsFiles
from qim.topology import GATEWAY, MAILBOX, MEDIA, SESSION, WRITER

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
SUPERVISOR_STOP_S = 60.0  # it stops every service in turn (each up to STOP_TIMEOUT_S)


@dataclass
class Stack:
    """A running (or recorded) set of service processes.

    `env`: variables every service gets; `instance_env`: per-instance overrides
    (listen addresses); `metrics`: name -> "host:port" of its /metrics and /healthz;
    `pids`: name -> pid. Processes this object started are held by mirakuru launchers;
    pids loaded from stack.json (an earlier CLI run) are stopped by pid.
    """

    dir: Path
    env: dict[str, str]
    metrics: dict[str, str]
    pids: dict[str, int] = field(default_factory=dict)
    die_with_parent: bool = False  # test runs: services get SIGTERM when pytest dies
    instance_env: dict[str, dict[str, str]] = field(default_factory=dict)
    # exit code of a service that exited non-zero after stop_service's signal
    exit_codes: dict[str, int] = field(default_factory=dict, repr=False)
    supervisor: Optional[int] = None  # pid of the stack's supervisor (qim/dev/supervisor.py), if any
    restarts: dict[str, int] = field(default_factory=dict)  # name -> restarts after a death, by the supervisor
    _launchers: dict[str, Launcher] = field(default_factory=dict, repr=False)

    @property
    def gateway_addr(self) -> str:
        """Client address of the (first) gateway ("127.0.0.1:PORT")."""
        return self.instance_env[GATEWAY]["QIM_GATEWAY_LISTEN"]

    @property
    def gateway_addrs(self) -> list[str]:
        """Client addresses of every gateway of the stack, in node order."""
        return [env["QIM_GATEWAY_LISTEN"] for name, env in self.instance_env.items()
                if name.rstrip("0123456789") == GATEWAY and "QIM_GATEWAY_LISTEN" in env]

    @property
    def token_key(self) -> str:
        """Path of the development token key (PEM private key, 0600): what
        qim.wire.devtoken.issue_dev_token and `qimctl token --key` take."""
        return str((self.dir / DEV_KEY_FILE).resolve())

    @property
    def tls(self) -> bool:
        """True when the stack runs over TLS (every stack but a plaintext measurement's)."""
        return "QIM_GATEWAY_TLS_CERT" in self.env

    @property
    def ca_file(self) -> Optional[str]:
        """The CA a client verifies the gateway with (QIM_CA_FILE); None on a plaintext stack."""
        return DevPki((self.dir / TLS_DIR).resolve()).ca_file if self.tls else None

    def tls_files(self, service: str) -> TlsFiles:
        """Certificate, key and CA of a development service identity ("gateway",
        "mailbox", "qimctl", ...): what a test presents to speak as that service."""
        return DevPki((self.dir / TLS_DIR).resolve()).files(service)

    def client_env(self) -> dict[str, str]:
        """The variables of stack.env: what a client or qimctl needs after sourcing it
        (QIM_GATEWAY_WS_ADDR / QIM_GATEWAY_WSS_ADDR: the WebSocket endpoints;
        QIM_GATEWAY_ADDRS / QIM_GATEWAY_WS_ADDRS: every gateway's; QIM_DEPLOYMENT: the
        name the clients' local stores are kept under, DIR/deployment when the stack keeps
        one, else the first gateway's address; QIM_MEDIA_URL: the MediaService's
        base URL, when the stack runs one)."""
        client_env = {"QIM_GATEWAY_ADDR": self.gateway_addr, "QIM_GATEWAY_ADDRS": ",".join(self.gateway_addrs),
                      "QIM_DEV_TOKEN_KEY": self.token_key}
        ws_listen = self.instance_env[GATEWAY].get("QIM_GATEWAY_WS_LISTEN")
        if ws_listen:
            client_env["QIM_GATEWAY_WS_ADDR"] = f"ws://{ws_listen}{WS_PATH}"
        ws_all = [f"ws://{env['QIM_GATEWAY_WS_LISTEN']}{WS_PATH}" for name, env in self.instance_env.items()
                  if name.rstrip("0123456789") == GATEWAY and env.get("QIM_GATEWAY_WS_LISTEN")]
        if ws_all:  # every gateway's, for a page that fails over (docs/decisions/0082)
            client_env["QIM_GATEWAY_WS_ADDRS"] = ",".join(ws_all)
        # the stores of this stack's clients are its, whichever gateway they use (0082),
        # and whichever port it moved to: a stack with remembered ports keeps its name (0150)
        kept = self.dir / DEPLOYMENT_FILE
        client_env["QIM_DEPLOYMENT"] = kept.read_text().strip() if kept.exists() else self.gateway_addr
        if MEDIA in self.metrics:  # the MediaService's base URL: the app sets client.media_url to it
            client_env["QIM_MEDIA_URL"] = f"http://{self.metrics[MEDIA]}"
        if self.tls:
            client_env["QIM_GATEWAY_WSS_ADDR"] = f"wss://{self.gateway_addr}{WS_PATH}"
        client_env.update({k: self.env[k] for k in CLIENT_VARS if k in self.env})
        if self.tls:
            client_env.update(DevPki((self.dir / TLS_DIR).resolve()).client_env())
        return client_env

    def save(self) -> None:
        """Write stack.json (pids, addresses) and stack.env (client variables), each whole
        (a new file renamed over the old: the supervisor writes while the CLI reads)."""
        for name, text in (("stack.json", json.dumps(
                {"env": self.env, "metrics": self.metrics, "pids": self.pids,
                 "instance_env": self.instance_env, "supervisor": self.supervisor,
                 "restarts": self.restarts}, indent=2)),
                ("stack.env", "".join(f"{k}={v}\n" for k, v in self.client_env().items()))):
            tmp = self.dir / f".{name}.{os.getpid()}"
            tmp.write_text(text)
            os.replace(tmp, self.dir / name)

    @classmethod
    def load(cls, dir: Path) -> Optional["Stack"]:
        """The stack recorded in `dir/stack.json`, None if none; EngineError if corrupt."""
        path = Path(dir) / "stack.json"
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text())
            return cls(Path(dir), data["env"], data["metrics"],
                       {k: int(v) for k, v in data["pids"].items()},
                       instance_env=data.get("instance_env", {}), supervisor=data.get("supervisor"),
                       restarts={k: int(v) for k, v in data.get("restarts", {}).items()})
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise EngineError(f"{path} is corrupt ({e}); stop its processes by hand "
                              f"and remove it") from e

    def count(self, service: str) -> int:
        """How many nodes of `service` this stack runs."""
        return sum(1 for n in self.names if n.rstrip("0123456789") == service)

    @property
    def names(self) -> list[str]:
        """Service instance names in start order."""
        return list(self.metrics)

    def start_service(self, name: str, extra_env: Optional[dict[str, str]] = None) -> int:
        """Start one service instance (again), optionally with extra environment (fault
        injection); returns its pid without waiting for /healthz (see wait_ready)."""
        if name not in self.metrics:
            raise EngineError(f"no service {name!r} in this stack; it has "
                              f"{', '.join(self.names)}")
        env = {**self.env, **self.instance_env.get(name, {}), **(extra_env or {}),
               "PYTHONUNBUFFERED": "1"}
        argv = death_wrapper(self.die_with_parent) + [sys.executable, "-m", "qim.app", kind_of(name).name]
        launcher = Launcher(argv, cwd=self.dir, log_path=self.dir / "logs" / f"{name}.log",
                            env=env, timeout=READY_TIMEOUT_S)
        try:
            launcher.start()  # no readiness callback: returns once spawned
        except ProcessExitedWithError as e:
            raise EngineError(f"{name} exited at once (code {e.exit_code}):\n"
                              f"{self.log_tail(name)}") from None
        pid = launcher.pid
        if pid is None:  # start() returned, so mirakuru spawned it: never None here
            raise EngineError(f"{name} has no pid after start")
        self._launchers[name] = launcher
        self.pids[name] = pid
        self.save()
        return pid

    def healthz(self, name: str, timeout: float = 1.0) -> tuple[int, str]:
        """(HTTP status, body) of a service's /healthz within `timeout` s; (0, reason)
        when unreachable or unanswered."""
        status, body, _ = self._probe(name, timeout)
        return status, body

    def _probe(self, name: str, timeout: float = 1.0) -> tuple[int, str, int]:
        """(status, body, foreign pid) of one /healthz request: the pid of X-Qim-Pid when
        the answer came from a process outside this stack's directory, else 0
        (qim.dev.stack_race; docs/decisions/0155)."""
        try:
            with urllib.request.urlopen(f"http://{self.metrics[name]}/healthz", timeout=timeout) as r:
                return r.status, r.read().decode(), foreign_pid(r.headers.get("X-Qim-Pid"), self.dir)
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(), 0
        except (urllib.error.URLError, OSError) as exc:
            return 0, str(exc), 0

    def _answered_by_another(self, name: str) -> int:
        """The pid that answered `name`'s /healthz when it is not a process of this stack,
        else 0 (also when unreachable now: the next round decides)."""
        return self._probe(name)[2]

    def alive(self, name: str) -> bool:
        """True if the service's process runs (a recorded pid only while it still runs
        in this stack's directory: the pid may have been reused since)."""
        launcher = self._launchers.get(name)
        if launcher is not None and launcher.pid is not None:
            return launcher.running()
        pid = self.pids.get(name)
        return pid is not None and pid_alive(pid) and pid_cwd(pid) == str(Path(self.dir).resolve())

    def wait_ready(self, names=None, timeout: float = READY_TIMEOUT_S) -> None:
        """Block until every named /healthz is 200. EngineError (with log tail) otherwise,
        naming the last answer too when the last probe got none (a loop that stopped
        answering after saying why it was not ready)."""
        deadline = time.monotonic() + timeout
        pending = list(names or self.names)
        answered: dict[str, str] = {}
        while pending:
            name = pending[0]
            if not self.alive(name):
                raise EngineError(f"{name} exited during start:\n{self.log_tail(name)}")
            status, body, other = self._probe(name)
            if status:
                answered[name] = f"{status} {body.strip()}"
            if status == 200 and other:
                raise PortTaken(f"{name}: its /healthz port {self.metrics[name]} answered for another process "
                                f"(pid {other}), not this stack's service:\n{self.log_tail(name)}")
            if status == 200:
                pending.pop(0)
                progress.note(f"{name} ready")
                continue
            if time.monotonic() > deadline:
                last = "" if status or name not in answered else f"; its last answer: {answered[name]}"
                raise EngineError(f"{name} not ready after {timeout}s ({status} "
                                  f"{body.strip()}{last}):\n{self.log_tail(name)}")
            time.sleep(0.2)

    def log_tail(self, name: str, lines: int = 30) -> str:
        """Last `lines` lines of the service's log file."""
        path = self.dir / "logs" / f"{name}.log"
        return ("\n".join(path.read_text(errors="replace").splitlines()[-lines:])
                if path.exists() else "(no log)")

    def stop_service(self, name: str, sig: int = signal.SIGTERM,
                     timeout: float = STOP_TIMEOUT_S) -> None:
        """Stop exactly the recorded pid (`sig`, SIGKILL after `timeout` s).

        A service that already exited (a fault-injection crash) is only reaped. EngineError
        for a name that is not one of this stack's services (a crash test with a typo in
        it would otherwise pass having crashed nothing).
        """
        if name not in self.metrics:
            raise EngineError(f"no service {name!r} in this stack; it has {', '.join(self.names)}")
        launcher = self._launchers.pop(name, None)
        if launcher is not None and launcher.pid is not None:
            try:
                launcher.stop_within(timeout, sig)
            except ProcessFinishedWithError as e:
                # the stop itself worked (the process is gone); the code is kept for
                # tests that care how a service shut down, its log says why
                self.exit_codes[name] = e.exit_code
        elif self.alive(name):
            stop_pid(self.pids[name], timeout, sig, what=name)

    def kill_service(self, name: str) -> None:
        """SIGKILL, for crash tests."""
        self.stop_service(name, signal.SIGKILL, 5.0)

    def restart_service(self, name: str, timeout: float = READY_TIMEOUT_S) -> int:
        """Stop one service by its pid and start it again with the same ports and
        environment; returns the new pid once its /healthz is 200 (EngineError if not)."""
        if name not in self.metrics:
            raise EngineError(f"no service {name!r} in this stack; it has "
                              f"{', '.join(self.names)}")
        self.stop_service(name)
        pid = self.start_service(name)
        self.wait_ready([name], timeout)
        return pid

    def supervised(self) -> bool:
        """True while the stack's supervisor process runs (it then owns the services)."""
        return (self.supervisor is not None and pid_alive(self.supervisor)
                and pid_cwd(self.supervisor) == str(Path(self.dir).resolve()))

    def down(self) -> None:
        """Stop the supervisor first (by its pid: it stops its services, so nothing is
        restarted behind us), then every service still running (reverse start order),
        and remove stack.json/stack.env."""
        if self.supervised():
            assert self.supervisor is not None
            stop_pid(self.supervisor, SUPERVISOR_STOP_S, what="supervisor")
        for name in reversed(self.names):
            self.stop_service(name)
        (self.dir / "stack.json").unlink(missing_ok=True)
        (self.dir / "stack.env").unlink(missing_ok=True)  # a stale file would point at dead ports


def stack_up(dir: Path, engine_env: dict[str, str], extra_env: Optional[dict[str, str]] = None,
             die_with_parent: bool = False, writers: int = 1, mailboxes: int = 1,
             sessions: int = 1, ports_file: Optional[Path] = None, tls: bool = True,
             nodes: Optional[Mapping[str, int]] = None, start: bool = True) -> Stack:
    """Start every service and wait until all are healthy.

    The layout comes from the service table (qim.dev.stack_layout): `nodes` ({service:
    count}, 1 each by default) instances of each kind, or through the older keywords
    `writers` writer instances (writer, writer2, ...), `mailboxes` mailbox nodes
    (mailbox, mailbox2, ...) and `sessions` session nodes (session, ...), their shards
    leased from the ShardRegistry (rendezvous over the live nodes of each kind);
    qim-archiver only with the archive tier.
    The environment is qim.dev.stack_env.plan_stack's: ports are fresh unless `ports_file`
    remembers them (qim.dev.stack_ports). The development token key of `dir` is kept,
    or generated the first time (qim.dev.devkeys); `extra_env` may override
    QIM_TOKEN_PUBLIC_KEYS (a second key for rotation tests). With `tls` (always, but for
    a plaintext measurement) the development certificates of DIR/tls are made or reused
    (qim.dev.certs) and every port is TLS; without, the plaintext development flags.
    A remembered port another process holds is replaced by a free one, said in one line
    (decision 0150); a fresh port taken before its service bound it lays the stack out
    again with other ports (PORT_RACE_RETRIES times, decision 0155). Raises EngineError
    when a service cannot start (everything started is stopped first). `start=False` lays the stack out and saves
    stack.json without starting anything (the supervisor does: qim.dev.supervisor).
    """
    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=True)
    # one MediaService node when the engines have an object store (qim/dev/engines_s3.py)
    media = {MEDIA: 1} if engine_env.get("QIM_S3_ENDPOINT") else {}
    counts = {WRITER: writers, MAILBOX: mailboxes, SESSION: sessions, **media, **(nodes or {})}
    for attempt in range(PORT_RACE_RETRIES + 1):
        plan = plan_stack(dir, engine_env, extra_env, counts, ports_file, tls)
        stack = Stack(dir, plan.env, plan.metrics, die_with_parent=die_with_parent, instance_env=plan.instance_env)
        if not start:  # a supervisor starts the services (qim/dev/supervisor.py)
            stack.save()
            return stack
        try:
            for name in stack.names:
                stack.start_service(name)
            stack.wait_ready()
            return stack
        except EngineError as exc:
            stack.down()
            if ports_file is not None or attempt == PORT_RACE_RETRIES or not port_race(exc):
                raise
            progress.note(f"a port was taken before its service bound it ({str(exc).splitlines()[0]}); "
                          "laying the stack out again with other ports")
        except BaseException:
            stack.down()
            raise
    raise AssertionError("unreachable")
