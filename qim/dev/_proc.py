"""Process plumbing shared by the development engines (Redis, Kafka).

An `Engine` owns one server process started from files in its own directory, on
ports fixed at creation, so `restart()` brings the same server back with the same
address and data. Processes run in their own session so that a CLI `up` can exit and
leave them running, and a Ctrl-C in the terminal does not reach them.

We stop only the pid we started (checked against the engine directory, which both
servers use as their working directory) and never look processes up by name.
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
from typing import Any

from qim.errors import EngineError

log = logging.getLogger(__name__)

def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago (bind to port 0).

    The kernel hands out ephemeral ports round-robin, so a port just released is not
    handed to the next caller; the small race with other programs is accepted.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> list[int]:
    """`n` distinct free ports, all held open together while choosing them."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.2) -> bool:
    """True if something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
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
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def rss_bytes(pid: int) -> int:
    """Resident set size of `pid` in bytes (0 if unknown)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def log_tail(*paths: Path, lines: int = 40) -> str:
    """Last `lines` lines of each existing file, labelled, for error messages."""
    out = []
    for p in paths:
        if p.exists():
            text = p.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"--- {p} (last {len(text)} lines) ---\n" + "\n".join(text))
    return "\n".join(out) if out else "(no log written)"


def _death_wrapper(die_with_parent: bool) -> list[str]:
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


class Engine:
    """One server process with fixed ports and its own directory.

    Subclasses set `name`, implement `_prepare()` (write config files, idempotent),
    `_command()` (argv), `_check_ready()` (raise or return False until it answers)
    and `addr`. `ports` maps a role ("main", "controller") to a port.
    """

    name = "engine"
    start_timeout = 30.0

    def __init__(self, dir: Path, ports: dict[str, int], pid: int | None = None,
                 die_with_parent: bool = False) -> None:
        self.dir = Path(dir).resolve()
        self.ports = dict(ports)
        self.pid = pid
        self.die_with_parent = die_with_parent
        self._proc: subprocess.Popen | None = None

    # --- subclass hooks -----------------------------------------------------
    @property
    def addr(self) -> str:
        """"host:port" clients connect to."""
        return f"127.0.0.1:{self.ports['main']}"

    @property
    def log_paths(self) -> list[Path]:
        return [self.dir / "stdout.log"]

    def _prepare(self) -> None:
        raise NotImplementedError

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _check_ready(self) -> bool:
        raise NotImplementedError

    # --- lifecycle ------------------------------------------------------------
    def start(self, timeout: float | None = None) -> "Engine":
        """Start the server and wait until it answers.

        Raises EngineError (with the log tail) if it exits or does not answer within
        `timeout` seconds; the half-started process is killed first.
        """
        if self.alive():
            return self
        for role, port in self.ports.items():
            if port_open(port):
                raise EngineError(f"{self.name}: {role} port {port} is already in use "
                                  f"by another process (dir {self.dir})")
        self.dir.mkdir(parents=True, exist_ok=True)
        self._prepare()
        out = open(self.dir / "stdout.log", "ab")
        try:
            self._proc = subprocess.Popen(
                _death_wrapper(self.die_with_parent) + self._command(), cwd=self.dir,
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True)
        finally:
            out.close()
        self.pid = self._proc.pid
        log.info("%s started pid=%d addr=%s", self.name, self.pid, self.addr)
        try:
            self.wait_ready(timeout or self.start_timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def wait_ready(self, timeout: float) -> None:
        """Poll `_check_ready` until true; EngineError on exit or timeout."""
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while True:
            if not self.alive():
                raise EngineError(f"{self.name} (pid {self.pid}) exited during start-up\n"
                                  + log_tail(*self.log_paths))
            try:
                if self._check_ready():
                    return
            except Exception as e:  # noqa: BLE001 - any failure just means "not yet"
                last = e
            if time.monotonic() > deadline:
                raise EngineError(f"{self.name} at {self.addr} did not answer within "
                                  f"{timeout:.0f}s (last error: {last})\n"
                                  + log_tail(*self.log_paths))
            time.sleep(0.1)

    def owns_pid(self) -> bool:
        """True if the recorded pid is alive and runs in this engine's directory.

        The cwd check guards against pid reuse after a reboot or a crash: we never
        signal a process that is not ours.
        """
        if not pid_alive(self.pid):
            return False
        if self._proc is not None and self._proc.pid == self.pid:
            return True
        return pid_cwd(self.pid) == str(self.dir)

    def alive(self) -> bool:
        """True if our process is running (it may not answer yet)."""
        return self.owns_pid()

    def healthy(self) -> bool:
        """True if our process is running and answers right now."""
        try:
            return self.alive() and bool(self._check_ready())
        except Exception:  # noqa: BLE001
            return False

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM the recorded pid, wait up to `timeout` s, then SIGKILL it."""
        if not self.owns_pid():
            self._forget()
            return
        log.info("stopping %s pid=%d", self.name, self.pid)
        os.kill(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not pid_alive(self.pid):
                self._forget()
                return
            time.sleep(0.05)
        log.warning("%s pid=%d ignored SIGTERM for %.0fs, killing", self.name, self.pid, timeout)
        self.kill()

    def kill(self) -> None:
        """SIGKILL the recorded pid (a crash, as far as the server can tell)."""
        if self.owns_pid():
            os.kill(self.pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while pid_alive(self.pid) and time.monotonic() < deadline:
                time.sleep(0.02)
        self._forget()

    def restart(self, timeout: float | None = None, hard: bool = False) -> "Engine":
        """Stop (SIGKILL if `hard`) and start again on the same ports and data."""
        self.kill() if hard else self.stop()
        return self.start(timeout)

    def _forget(self) -> None:
        if self._proc is not None:
            try:
                self._proc.wait(timeout=0)
            except subprocess.TimeoutExpired:
                pass
        self._proc = None
        self.pid = None

    def to_state(self) -> dict[str, Any]:
        """JSON-able record: name, pid, ports, dir, addr."""
        return {"name": self.name, "pid": self.pid, "ports": self.ports,
                "dir": str(self.dir), "addr": self.addr}
