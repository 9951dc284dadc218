"""`Engine`: one development server process with fixed ports and its own directory.

Ports are fixed at creation, so `restart()` brings the same server back with the same
address and data (crash tests SIGKILL and restart Redis, Kafka, Cassandra). The process
runs in its own session, so `qim-dev engines up` can exit and leave it running and a
Ctrl-C in the terminal does not reach it. Start and readiness go through
`qim.dev._proc.Launcher` (mirakuru); a pid recorded by an earlier CLI run is adopted
and stopped by pid, after checking it still runs in this engine's directory.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Self

from mirakuru.exceptions import ProcessExitedWithError, ProcessFinishedWithError, TimeoutExpired

from qim.dev import progress
from qim.dev._proc import Launcher, death_wrapper, kill_pid, log_tail, pid_alive, pid_cwd, port_in_use, stop_pid
from qim.errors import EngineError

log = logging.getLogger(__name__)
# What to do after a start that timed out: on a machine busy with other work a JVM engine
# can take longer than its start_timeout (Kafka's KRaft activation took over 90 s at a load
# of 20 on two cores, where a second `make demo` had it ready in seconds); the next
# `up` keeps the engines already running and starts only the missing one.
NOT_READY_HINT = ("; a busy machine can take longer: run the same command again (make demo, make up, "
                  "qim-dev engines up), the engines already up are kept")


class Engine:
    """One server process with fixed ports and its own directory.

    Subclasses set `name`, implement `_prepare()` (write config files, idempotent),
    `_command()` (argv) and `_check_ready()` (raise or return False until it is truly
    ready, not merely listening). `ports` maps a role ("main", "controller", ...) to a
    port; `addr` is "127.0.0.1:<main>". `exit_code_on_term` is the code the server
    exits with on SIGTERM (a JVM: 143), anything else raises EngineError on stop.
    """

    name = "engine"
    host = "127.0.0.1"  # the loopback address it listens on (a CQL cluster node: 127.0.0.N)
    start_timeout = 30.0
    exit_code_on_term: int | None = None

    def __init__(self, dir: Path, ports: dict[str, int], pid: int | None = None,
                 die_with_parent: bool = False) -> None:
        self.dir = Path(dir).resolve()
        self.ports = dict(ports)
        self.pid = pid
        self.die_with_parent = die_with_parent
        self._launcher: Launcher | None = None

    # --- subclass hooks -----------------------------------------------------
    @property
    def addr(self) -> str:
        """"host:port" clients connect to."""
        return f"{self.host}:{self.ports['main']}"

    @property
    def log_paths(self) -> list[Path]:
        """Files whose tail explains a failed start."""
        return [self.dir / "stdout.log"]

    def _prepare(self) -> None:
        raise NotImplementedError

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _check_ready(self) -> bool:
        raise NotImplementedError

    # --- lifecycle ------------------------------------------------------------
    def start(self, timeout: float | None = None) -> Self:
        """Start the server and wait until it is ready (if it already runs: wait only).

        Raises EngineError: a port of ours is taken by another process (one line), or
        the server exits or is not ready within `timeout` s (with the log tail; the
        half-started process is killed first).
        """
        if self.alive():
            self.wait_ready(timeout or self.start_timeout)
            return self
        for role, port in self.ports.items():
            if port_in_use(port, self.host):
                raise EngineError(f"{self.name}: {role} port {port} is already in use by "
                                  f"another process (engine dir {self.dir})")
        self.dir.mkdir(parents=True, exist_ok=True)
        self._prepare()
        timeout = timeout or self.start_timeout
        launcher = Launcher(death_wrapper(self.die_with_parent) + self._command(),
                            cwd=self.dir, log_path=self.dir / "stdout.log",
                            timeout=timeout, ready=self._check_ready,
                            expected_returncode=self.exit_code_on_term)
        self._launcher = launcher
        progress.note(f"starting {self.name}")
        try:
            launcher.start()
        except ProcessExitedWithError as e:
            self._forget()
            raise EngineError(f"{self.name} exited during start-up (code {e.exit_code})\n"
                              + log_tail(*self.log_paths)) from None
        except TimeoutExpired:
            self._forget()  # mirakuru killed it already
            raise EngineError(f"{self.name} at {self.addr} was not ready within "
                              f"{timeout:.0f}s (last error: {launcher.last_error}){NOT_READY_HINT}\n"
                              + log_tail(*self.log_paths)) from None
        except BaseException:
            self.kill()
            raise
        self.pid = launcher.pid
        log.info("%s ready pid=%d addr=%s", self.name, self.pid, self.addr)
        progress.note(f"{self.name} ready at {self.addr}")
        return self

    def wait_ready(self, timeout: float) -> None:
        """Poll `_check_ready` of a running (e.g. adopted, still booting) server.

        Raises EngineError if it exits or is not ready within `timeout` s.
        """
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
                raise EngineError(f"{self.name} at {self.addr} was not ready within "
                                  f"{timeout:.0f}s (last error: {last}){NOT_READY_HINT}\n"
                                  + log_tail(*self.log_paths))
            time.sleep(0.1)

    def alive(self) -> bool:
        """True if our process runs (it may not be ready yet).

        A pid recorded by an earlier run counts only while it runs in this engine's
        directory: after a reboot or a crash the pid may belong to someone else, and
        we never signal a process that is not ours.
        """
        if self._launcher is not None and self._launcher.pid is not None:
            return self._launcher.running()
        pid = self.pid
        if pid is None or not pid_alive(pid):
            return False
        return pid_cwd(pid) == str(self.dir)

    def healthy(self) -> bool:
        """True if our process runs and is ready right now."""
        try:
            return self.alive() and bool(self._check_ready())
        except Exception:  # noqa: BLE001 - "not ready" is the answer, not an error
            return False

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM exactly our process, wait up to `timeout` s, then SIGKILL it.

        Raises EngineError if it exits with an unexpected code (an unclean shutdown).
        """
        if not self.alive():
            self._forget()
            return
        log.info("stopping %s pid=%d", self.name, self.pid)
        try:
            if self._launcher is not None and self._launcher.pid is not None:
                self._launcher.stop_within(timeout)
            elif self.pid is not None:  # alive() above: a recorded pid that still runs here
                stop_pid(self.pid, timeout, what=self.name)
        except ProcessFinishedWithError as e:
            raise EngineError(f"{self.name} (pid {self.pid}) exited with code {e.exit_code} "
                              f"on SIGTERM\n" + log_tail(*self.log_paths)) from None
        finally:
            self._forget()

    def kill(self) -> None:
        """SIGKILL exactly our process (a crash, as far as the server can tell)."""
        if self._launcher is not None and self._launcher.pid is not None:
            self._launcher.kill()
        elif self.alive() and self.pid is not None:
            kill_pid(self.pid)
        self._forget()

    def restart(self, timeout: float | None = None, hard: bool = False) -> "Engine":
        """Stop (SIGKILL if `hard`) and start again on the same ports and data."""
        self.kill() if hard else self.stop()
        return self.start(timeout)

    def _forget(self) -> None:
        self._launcher = None
        self.pid = None

    def to_state(self) -> dict[str, Any]:
        """JSON-able record: name, pid, ports, dir, addr."""
        return {"name": self.name, "pid": self.pid, "ports": self.ports,
                "dir": str(self.dir), "addr": self.addr}
