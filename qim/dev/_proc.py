"""Process plumbing shared by the development engines and the service supervisor.

Starting a process and waiting until it answers is mirakuru's job, choosing free local
ports is port-for's. What is left here is what neither does for us:

- `port_in_use`: port-for's check refuses a port in TIME_WAIT (see its docstring);
- `Launcher` is a mirakuru `Executor` with three rules changed (1 and 3: without them
  tests/dev/test_proc.py::test_engine_started_by_an_exiting_process_keeps_running
  fails, i.e. a plain executor kills its server when the starting process exits):
  1. no `mirakuru_uuid` marker in the child's environment: mirakuru's atexit hook kills
     every process whose marker *contains* the exiting process's pid as a substring, so
     `qim-dev engines up` would take its engines down with it when the CLI exits (and a
     test session could hit another session's processes whose uuid happens to contain
     its pid). Stop/kill signal exactly the process group we started (the server, and
     a child it forks itself, e.g. Redis's AOF rewrite), nothing found by environment;
  2. the new session comes from `start_new_session=True`, not mirakuru's
     `preexec_fn=os.setsid` (a preexec_fn is unsafe once librdkafka threads exist);
  3. dropping the executor object never kills the process (mirakuru's `__del__` does),
     so the CLI can exit and leave the servers running.
- Processes recorded by pid in a state file by an earlier CLI run are not our children:
  `pid_alive`, `stop_pid` and `kill_pid` handle those; mirakuru has no way to adopt a pid.
- `death_wrapper`: parent-death signal, so a killed pytest leaves nothing running.

We stop only pids we started or recorded (checked against their working directory) and
never look processes up by name.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import mirakuru
import port_for
import psutil
from mirakuru.base import ENV_UUID
from mirakuru.exceptions import ProcessExitedWithError

from qim.errors import EngineError

log = logging.getLogger(__name__)


def pick_ports(n: int, exclude: Iterable[int] = ()) -> list[int]:
    """`n` distinct ports that are free now, chosen by port-for.

    port-for picks outside the kernel's ephemeral range, so a port we remember across
    restarts (engines, `.qim/ports.json`) is not handed to an outgoing connection
    while its server is down. Raises EngineError if none is free.
    """
    candidates = port_for.available_good_ports() - set(exclude)
    out: list[int] = []
    for _ in range(n):
        try:
            port = port_for.select_random(candidates)
        except port_for.PortForException as e:
            raise EngineError(f"no free local port left to choose: {e}") from e
        candidates.discard(port)
        out.append(port)
    return out


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True if something listens on `host`:`port` or holds it bound (`host`: a loopback
    address; the nodes of a development Cassandra cluster use 127.0.0.2 and .3 too).

    Not port-for's `port_is_used`: its bind has no SO_REUSEADDR, so it calls a port
    "used" while the last connection to our just-killed server sits in TIME_WAIT, and
    restart() would refuse its own port (test_restart_same_port_same_dir_new_pid).
    Servers bind with SO_REUSEADDR, so that is the question to ask.
    """
    with socket.socket() as s:
        s.settimeout(0.5)
        if s.connect_ex((host, port)) == 0:
            return True
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def pid_alive(pid: int | None) -> bool:
    """True if `pid` is a live (non-zombie) process; reaps it if it is our child."""
    if not pid:
        return False
    try:
        # our own child: waitpid reports it only once every thread has exited (and
        # released its sockets), and reaping it keeps it from lingering as a zombie
        return os.waitpid(pid, os.WNOHANG)[0] != pid
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # someone else's child: a zombie is dead only when all its threads are; a JVM's
    # main thread turns zombie while other threads still hold the listening ports
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return False
    for t in tasks:
        try:
            if (t / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                return True
        except OSError:
            continue
    return False


def pid_cwd(pid: int) -> str | None:
    """Working directory of `pid` or None if it cannot be read."""
    try:
        return psutil.Process(pid).cwd()
    except (psutil.Error, OSError):
        return None


def rss_bytes(pid: int | None) -> int:
    """Resident set size of `pid` in bytes (0 if unknown)."""
    try:
        return psutil.Process(pid).memory_info().rss if pid else 0
    except (psutil.Error, OSError):
        return 0


def stop_pid(pid: int, timeout: float, sig: int = signal.SIGTERM, what: str = "") -> None:
    """Send `sig` to exactly `pid`, wait up to `timeout` s, then SIGKILL it.

    For processes recorded by an earlier run (not our children); the caller has
    checked the pid is ours. `what` names the process (an engine or service name) in
    the warning a SIGKILL logs: `make down` shows it, and a bare pid tells nobody which
    one was slow (decision 0093).
    """
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return
        time.sleep(0.05)
    log.warning("%s (pid %d) did not stop within %.0f s of %s: killed it (SIGKILL)", what or "process", pid,
                timeout, signal.Signals(sig).name)
    kill_pid(pid)


def kill_pid(pid: int, wait: float = 10.0) -> None:
    """SIGKILL exactly `pid` and wait up to `wait` s until it (all threads) is gone."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + wait
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def log_tail(*paths: Path, lines: int = 40) -> str:
    """Last `lines` lines of each existing file, labelled, for error messages."""
    out = []
    for p in paths:
        if p.exists():
            text = p.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {p} (last {len(text)} lines) ---\n" + "\n".join(text))
    return "\n".join(out) if out else "(no log written)"


def death_wrapper(die_with_parent: bool) -> list[str]:
    """argv prefix that makes the child get SIGTERM when its parent thread exits.

    Used for test sessions, so a killed pytest does not leave brokers behind on a CI
    machine. `setpriv` (util-linux, Essential in Debian) rather than a preexec_fn,
    which is unsafe once librdkafka threads exist. The signal fires when the
    *thread* that forked exits, so only the main thread may ask for it.
    """
    if not die_with_parent or threading.current_thread() is not threading.main_thread():
        return []
    setpriv = shutil.which("setpriv")
    if not setpriv:
        log.warning("setpriv not found: engines will outlive a killed test run")
        return []
    return [setpriv, "--pdeathsig", "TERM", "--"]



def require_executable(name: str) -> str:
    """Full path of `name` on PATH; raises EngineError if it is missing."""
    path = shutil.which(name)
    if not path:
        raise EngineError(f"{name!r} is not on PATH")
    return path


def apt_install(packages: list[str]) -> None:
    """`apt-get update` then `apt-get install -y packages`; EngineError on failure."""
    if os.geteuid() != 0:
        raise EngineError(f"missing {packages}; install them (apt-get needs root)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", *packages]):
        log.info("running %s", " ".join(cmd))
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise EngineError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-3000:]}")


class Launcher(mirakuru.Executor):
    """A mirakuru Executor for one server process, with QIM's rules (module docstring).

    `argv` runs in `cwd` with `env` added to os.environ, stdout+stderr appended to
    `log_path`, stdin from /dev/null, in a session of its own. `start()` returns once
    `ready()` is true (None: at once); raises mirakuru's TimeoutExpired (the process is
    killed first) or ProcessExitedWithError. `last_error` keeps the last exception a
    readiness check raised, for the caller's message. `stop_within()`/`kill()` signal
    the process group we started (the server is its only member unless it forks).
    """

    def __init__(self, argv: list[str], *, cwd: Path, log_path: Path, timeout: float,
                 env: dict[str, str] | None = None,
                 ready: Callable[[], bool] | None = None,
                 expected_returncode: int | None = None) -> None:
        self._log_path = Path(log_path)
        self._ready = ready
        self.last_error: Exception | None = None
        super().__init__(argv, cwd=str(cwd), timeout=timeout, envvars=env,
                         stdin=subprocess.DEVNULL, stdout=None, stderr=None,
                         expected_returncode=expected_returncode)

    @property
    def pid(self) -> int | None:
        """Pid of the running process, None before start / after stop."""
        return self.process.pid if self.process is not None else None

    @property
    def envvars(self) -> dict[str, str]:
        """os.environ plus `env`, without mirakuru's marker (rule 1)."""
        env = os.environ.copy()
        env.update(self._envvars)
        env.pop(ENV_UUID, None)  # rule 1: no marker, so no kill-by-environment
        return env

    @property
    def _popen_kwargs(self) -> dict[str, Any]:
        kw = super()._popen_kwargs
        kw.pop("preexec_fn", None)  # rule 2
        kw["start_new_session"] = True
        kw["universal_newlines"] = False
        return kw

    def start(self) -> "Launcher":
        """Start and wait until ready (see class docstring)."""
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._log_path, "ab") as out:  # Popen dups the fd; we close ours
            self._stdout = out
            self._stderr = subprocess.STDOUT
            try:
                return super().start()
            finally:
                self._stdout = self._stderr = None

    def pre_start_check(self) -> bool:
        """Always False: the caller checks (and names) a taken port before starting."""
        return False

    def after_start_check(self) -> bool:
        """`ready()`, any exception meaning "not yet" (kept in `last_error`); raises
        ProcessExitedWithError if the process exited, even with code 0."""
        if self.process is not None and self.process.poll() == 0:
            # exited "successfully" before it answered: as much a failure as exit 1
            raise ProcessExitedWithError(self, 0)
        if self._ready is None:
            return True
        try:
            return bool(self._ready())
        except Exception as e:  # noqa: BLE001 - any failure means "not yet"
            self.last_error = e
            return False

    def stop_within(self, timeout: float, sig: int = signal.SIGTERM) -> None:
        """`sig`, wait up to `timeout` s, then SIGKILL; reaps the process.

        Raises mirakuru's ProcessFinishedWithError if it exits with a code other than
        the expected one (a server that failed to shut down cleanly).
        """
        if not self.running():
            self._clear_process()
            return
        self._timeout = timeout  # mirakuru waits `_timeout` for start and stop alike
        self.stop(stop_signal=sig)

    def _kill_all_kids(self, sig: int) -> set[int]:
        return set()  # rule 1: we signal our own process group only

    def __del__(self) -> None:
        pass  # rule 3: the process outlives this object (CLI `up` exits)
