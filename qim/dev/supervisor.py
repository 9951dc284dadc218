"""The development stack's supervisor: one small process per stack that starts every
service of DIR/stack.json, restarts one that dies and stops them all on SIGTERM
(docs/operations.md "Supervision"; docs/decisions/0035-ops-supervision-and-units.md).

Why a process of its own: `qim-dev stack up` exits after the stack is ready, and a dead
service must come back without anyone running a command. The supervisor is started in
a session of its own (it outlives the CLI), records its pid in stack.json
(`supervisor`), and is the parent of every service, so it learns each exit status from
waitpid rather than guessing from a vanished pid. `qim-dev stack down` (and `make down`)
stop it first by that pid; it stops its services in reverse start order and exits 0.

Restart rule: a service that exits (any status, a signal too) is started again with the
same ports and environment after a bounded backoff: BACKOFF_FIRST_S, doubling for each
death in a row up to BACKOFF_MAX_S; a service that ran STABLE_S or longer starts the row
again. Each restart counts in stack.json `restarts` (shown by `qim-dev stack status`)
and logs one line naming the exit status, in DIR/logs/supervisor.log and the service's
own log; a service whose listener's address was in use says so ("gateway (pid N) exit
status 3, its port is in use by another process (127.0.0.1:7100); restart 1 in 0.5s"),
and `stack up` refuses such a death during the start at once (qim.dev.start_watch;
decision 0150). `qim-dev stack restart NAME` asks the supervisor (DIR/supervisor.request +
SIGUSR1): a requested restart is not a death and does not count.

Health rule (qim/dev/healthwatch.py; docs/decisions/0074-supervision-acts-on-health.md):
a live service whose /healthz has not answered 200 for longer than `unhealthy_s` (30 s
by default, `--unhealthy-restart-s`), or that was not healthy once within the start
grace, is stopped (SIGTERM, SIGKILL after STOP_TIMEOUT_S) and restarted as if it had
died: the same line ("gateway (pid N) unhealthy for 31.0s (/healthz 503: ...); restart
2 in 0.5s"), the same backoff and restart count.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from qim.dev._proc import death_wrapper, pid_alive
from qim.dev.healthwatch import START_GRACE_S, UNHEALTHY_RESTART_S, HealthWatch
from qim.dev.stack import READY_TIMEOUT_S, STOP_TIMEOUT_S, Stack
from qim.dev.start_watch import listen_failure, wait_supervised
from qim.errors import EngineError
from qim.obs.engine_probe import engines_away

BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 30.0
STABLE_S = 30.0  # a service that ran this long before dying starts its backoff afresh
POLL_S = 0.2
REQUEST_FILE = "supervisor.request"  # names to restart on request, one a line
# the health watch's wait for one /healthz answer: a loop lagging a second on a loaded
# host (a reconnect storm) is slow, not unhealthy; only a refusal, a 503 or no answer
# within this many seconds counts against the unhealthy clock (decision 0074)
HEALTHZ_WAIT_S = 5.0
LOG_FILE = "supervisor.log"  # under DIR/logs

log = logging.getLogger("qim.dev.supervisor")


def describe_exit(returncode: Optional[int]) -> str:
    """'exit status 1', 'killed by signal 9 (SIGKILL)' or 'exit status unknown'."""
    if returncode is None:
        return "exit status unknown"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "?"
        return f"killed by signal {-returncode} ({name})"
    return f"exit status {returncode}"


def backoff_s(deaths_in_a_row: int) -> float:
    """Delay before the restart that follows the n-th death in a row (n ≥ 1), seconds."""
    return min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** max(0, deaths_in_a_row - 1))


class Supervisor:
    """Runs the services of one stack (module doc). `run()` blocks until SIGTERM/SIGINT."""

    def __init__(self, stack: Stack, unhealthy_s: float = UNHEALTHY_RESTART_S,
                 start_grace_s: float = START_GRACE_S) -> None:
        self.stack = stack
        # an engine away holds the health clock: no restart for what a restart cannot cure (0091)
        self.health = HealthWatch(lambda name: stack.healthz(name, HEALTHZ_WAIT_S), lambda: list(stack._launchers), unhealthy_s,
                                  start_grace_s=start_grace_s, away=lambda: engines_away(stack.env))
        self.started_at: dict[str, float] = {}
        self.in_a_row: dict[str, int] = {}
        self.due: dict[str, float] = {}  # name -> monotonic time of its pending restart
        self.stopping = False
        self.requested = False

    def _note(self, name: str, line: str) -> None:
        log.warning("%s", line)
        try:  # the service's own log tells the same story where an operator looks first
            with open(self.stack.dir / "logs" / f"{name}.log", "a") as f:
                f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} qim-dev supervisor: {line}\n")
        except OSError:
            pass

    def _start(self, name: str) -> None:
        try:
            self.stack.start_service(name)
            self.started_at[name] = time.monotonic()
            self.health.started(name)
        except EngineError as exc:  # it exited at once: another death, same backoff
            self._died(name, str(exc).splitlines()[0])

    def _died(self, name: str, status: str) -> None:
        self.health.forget(name)
        ran = time.monotonic() - self.started_at.get(name, 0.0)
        self.in_a_row[name] = 1 if ran >= STABLE_S else self.in_a_row.get(name, 0) + 1
        delay = backoff_s(self.in_a_row[name])
        self.stack.pids.pop(name, None)
        self.stack.save()
        self.due[name] = time.monotonic() + delay
        self._note(name, f"{name} {status}; restart {self.stack.restarts.get(name, 0) + 1} in {delay:.1f}s")

    def _check(self) -> None:
        for name, launcher in list(self.stack._launchers.items()):
            proc = launcher.process
            if proc is None or proc.poll() is None:
                continue
            pid = proc.pid
            self.stack._launchers.pop(name)
            # a port taken by another process is named: restarting on it cures nothing (0150)
            why = describe_exit(proc.returncode) + listen_failure(self.stack.log_tail(name, 50))
            self._died(name, f"(pid {pid}) {why}")
        for name, why in self.health.overdue():
            stuck = self.stack.pids.get(name)
            self._note(name, f"{name} (pid {stuck}) {why}: stopping it")
            self.stack.stop_service(name, timeout=STOP_TIMEOUT_S)
            self._died(name, f"(pid {stuck}) {why}")
        now = time.monotonic()
        for name, at in list(self.due.items()):
            if at <= now and not self.stopping:
                del self.due[name]
                self.stack.restarts[name] = self.stack.restarts.get(name, 0) + 1
                self._start(name)

    def _requests(self) -> None:
        path = self.stack.dir / REQUEST_FILE
        try:
            names = path.read_text().split()
            path.unlink()
        except OSError:
            return
        for name in names:
            if name in self.stack.metrics:
                log.warning("%s restart requested", name)
                self.health.forget(name)
                self.stack.stop_service(name)
                self.due.pop(name, None)
                self._start(name)

    def run(self) -> int:
        """Start every service, supervise, stop them all on SIGTERM/SIGINT; exit code 0."""
        def stop(*_: object) -> None:
            self.stopping = True

        def request(*_: object) -> None:
            self.requested = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGUSR1, request)
        self.stack.supervisor = os.getpid()
        for name in self.stack.names:
            self._start(name)
        self.health.start()
        while not self.stopping:
            if self.requested:
                self.requested = False
                self._requests()
            self._check()
            time.sleep(POLL_S)
        self.health.stop()
        for name in reversed(self.stack.names):
            self.stack.stop_service(name)
        self.stack.pids.clear()
        self.stack.supervisor = None
        self.stack.save()
        log.warning("stopped every service")
        return 0


def spawn(stack: Stack, die_with_parent: bool = False, unhealthy_restart_s: Optional[float] = None,
          start_grace_s: Optional[float] = None) -> int:
    """Start the supervisor of a stack laid out by stack_up(start=False); returns its
    pid once every /healthz is 200, a service that died during the start restarted by
    the supervisor (qim.dev.start_watch: bounded restarts, said on the terminal).
    EngineError (the supervisor stopped first) otherwise.
    `unhealthy_restart_s`: the health rule's limit (module doc; default 30 s); `start_grace_s`:
    its start grace (default 120 s; tests shorten it)."""
    logs = stack.dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    argv = death_wrapper(die_with_parent) + [sys.executable, "-m", "qim.dev.supervisor", str(stack.dir)]
    if die_with_parent:
        argv.append("--die-with-parent")
    if unhealthy_restart_s is not None:
        argv += ["--unhealthy-restart-s", str(unhealthy_restart_s)]
    if start_grace_s is not None:
        argv += ["--start-grace-s", str(start_grace_s)]
    with open(logs / LOG_FILE, "ab") as out:
        proc = subprocess.Popen(argv, cwd=stack.dir, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + READY_TIMEOUT_S
    try:
        while True:
            loaded = Stack.load(stack.dir)
            if loaded is not None and loaded.supervisor == proc.pid:
                # a service dying during the start is the supervisor's to restart (start_watch)
                ready = wait_supervised(stack.dir, lambda: proc.poll() is None)
                stack.pids, stack.supervisor, stack.restarts = ready.pids, proc.pid, ready.restarts
                return proc.pid
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = "\n".join((logs / LOG_FILE).read_text(errors="replace").splitlines()[-20:])
                raise EngineError(f"the stack's supervisor did not start the services:\n{tail}")
            time.sleep(POLL_S)
    except BaseException:
        if pid_alive(proc.pid):
            proc.terminate()
            proc.wait(timeout=60)
        left = Stack.load(stack.dir)
        if left is not None:
            left.down()
        raise


def supervised_stack_up(dir: Path, engine_env: dict[str, str], die_with_parent: bool = False,
                        unhealthy_restart_s: Optional[float] = None, start_grace_s: Optional[float] = None,
                        **stack_kw: object) -> Stack:
    """stack_up (qim.dev.stack: same keywords) with the services run by a supervisor
    (`unhealthy_restart_s`: its health rule's limit, default 30 s); returns the Stack
    once every /healthz is 200 (EngineError otherwise)."""
    from qim.dev.stack import stack_up

    stack = stack_up(dir, engine_env, die_with_parent=die_with_parent, start=False, **stack_kw)  # type: ignore[arg-type]
    spawn(stack, die_with_parent, unhealthy_restart_s, start_grace_s)
    return stack


def request_restart(stack: Stack, name: str, timeout: float = READY_TIMEOUT_S) -> int:
    """Ask the running supervisor to restart `name`; the new pid once its /healthz is 200
    (EngineError otherwise or for an unknown name)."""
    if name not in stack.metrics:
        raise EngineError(f"no service {name!r} in this stack; it has {', '.join(stack.names)}")
    old = stack.pids.get(name)
    with open(stack.dir / REQUEST_FILE, "a") as f:
        f.write(name + "\n")
    assert stack.supervisor is not None
    os.kill(stack.supervisor, signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = Stack.load(stack.dir)
        pid = now.pids.get(name) if now is not None else None
        if pid is not None and pid != old and now is not None and now.healthz(name)[0] == 200:
            return pid
        time.sleep(POLL_S)
    raise EngineError(f"{name} not restarted and healthy within {timeout:.0f}s")


def main(argv: Optional[list[str]] = None) -> int:
    """`python -m qim.dev.supervisor DIR [--die-with-parent]` (started by spawn())."""
    p = argparse.ArgumentParser(prog="qim-dev-supervisor")
    p.add_argument("dir")
    p.add_argument("--die-with-parent", action="store_true")
    p.add_argument("--unhealthy-restart-s", type=float, default=UNHEALTHY_RESTART_S,
                   help="restart a service whose /healthz failed for longer than this (seconds, > 0)")
    p.add_argument("--start-grace-s", type=float, default=START_GRACE_S,
                   help="restart a service not healthy this long after its start (seconds, > 0; doubles per miss)")
    args = p.parse_args(argv)
    if not 0 < args.unhealthy_restart_s < float("inf"):  # nan, inf: no limit at all
        p.error(f"--unhealthy-restart-s must be a number of seconds > 0, got {args.unhealthy_restart_s}")
    if not 0 < args.start_grace_s < float("inf"):
        p.error(f"--start-grace-s must be a number of seconds > 0, got {args.start_grace_s}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s qim-dev supervisor: %(message)s")
    stack = Stack.load(Path(args.dir))
    if stack is None:
        print(f"qim-dev supervisor: no stack recorded in {args.dir}", file=sys.stderr)
        return 2
    stack.die_with_parent = args.die_with_parent
    return Supervisor(stack, args.unhealthy_restart_s, args.start_grace_s).run()


if __name__ == "__main__":
    sys.exit(main())
