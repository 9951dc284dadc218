"""The process plumbing (qim/dev/_proc.py, qim/dev/engine.py) on a tiny real server.

What must survive the move to mirakuru/port-for: every engine has its own port and
directory; we stop exactly the pid we started; a killed parent takes test engines with
it (parent-death signal); a CLI's engines outlive the CLI; restart() comes back on the
same port and directory.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qim.dev._proc import pick_ports, pid_alive
from qim.errors import EngineError

sys.path.insert(0, str(Path(__file__).parent))
from tiny_engine import TinyEngine  # noqa: E402

HERE = Path(__file__).parent
REPO = HERE.parents[1]


def _spawn_starter(d: Path, port: int, die_with_parent: bool, mode: str) -> subprocess.Popen:
    """A separate Python process that starts a TinyEngine (like `qim-dev engines up`)."""
    env = dict(os.environ, PYTHONPATH=f"{REPO}:{HERE}")
    return subprocess.Popen([sys.executable, str(HERE / "tiny_engine.py"), str(d), str(port),
                             "1" if die_with_parent else "0", mode],
                            stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_pick_ports_distinct_free_and_not_ephemeral():
    ports = pick_ports(20)
    assert len(set(ports)) == 20
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert all(1024 < p < low for p in ports)  # never one the kernel hands out itself
    assert not set(pick_ports(5, exclude=ports)) & set(ports)


def test_engine_started_by_an_exiting_process_keeps_running(tmp_path):
    # `qim-dev engines up` exits after starting the engines; they must stay up (a plain
    # mirakuru executor kills them from its atexit hook: the reason for Launcher rule 1)
    port = pick_ports(1)[0]
    starter = _spawn_starter(tmp_path / "e", port, False, "exit")
    out, _ = starter.communicate(timeout=30)
    assert starter.returncode == 0
    pid = int(out.split()[0])
    time.sleep(0.5)
    adopted = TinyEngine(tmp_path / "e", {"main": port}, pid)
    try:
        assert pid_alive(pid), "the engine died with the process that started it"
        assert adopted.alive() and adopted.healthy()
    finally:
        adopted.stop(timeout=5)  # a recorded pid, not our child: stopped by pid
    assert _wait_gone(pid)


def test_test_engine_dies_with_a_killed_parent(tmp_path):
    port = pick_ports(1)[0]
    starter = _spawn_starter(tmp_path / "e", port, True, "hold")
    pid = int(starter.stdout.readline())
    assert pid_alive(pid)
    starter.kill()  # a killed pytest: no fixture teardown runs
    starter.wait()
    assert _wait_gone(pid), "parent-death signal did not stop the engine"


def test_stop_signals_exactly_our_pid(tmp_path):
    a = TinyEngine(tmp_path / "a", {"main": pick_ports(1)[0]}).start()
    b = TinyEngine(tmp_path / "b", {"main": pick_ports(1)[0]}).start()  # same command line
    decoy = subprocess.Popen(["sleep", "60"])
    try:
        a_pid = a.pid
        a.stop(timeout=5)
        assert not pid_alive(a_pid)
        assert b.healthy() and decoy.poll() is None
    finally:
        decoy.kill()
        decoy.wait()
        b.stop(timeout=5)


def test_recorded_pid_of_another_directory_is_never_signalled(tmp_path):
    # after a reboot the recorded pid may belong to anyone: only a process running in
    # the engine's own directory counts as ours
    decoy = subprocess.Popen(["sleep", "60"], cwd=tmp_path)
    try:
        stale = TinyEngine(tmp_path / "e", {"main": pick_ports(1)[0]}, decoy.pid)
        assert not stale.alive()
        stale.stop(timeout=1)
        stale.kill()
        assert decoy.poll() is None
    finally:
        decoy.kill()
        decoy.wait()


def test_restart_same_port_same_dir_new_pid(tmp_path):
    port = pick_ports(1)[0]
    eng = TinyEngine(tmp_path / "e", {"main": port}).start()
    try:
        for hard in (True, False):
            old = eng.pid
            eng.restart(hard=hard)
            assert eng.pid != old and not pid_alive(old)
            assert eng.ports == {"main": port} and eng.healthy()
            assert Path(f"/proc/{eng.pid}/cwd").resolve() == (tmp_path / "e").resolve()
    finally:
        eng.stop(timeout=5)


def test_taken_port_is_a_one_line_error_naming_it(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(EngineError) as ei:
            TinyEngine(tmp_path / "e", {"main": port}).start()
    msg = str(ei.value)
    assert "\n" not in msg and f"port {port}" in msg and "in use" in msg


def test_exit_during_start_reports_log_tail(tmp_path):
    class Broken(TinyEngine):
        def _command(self):
            return [sys.executable, "-c", "import sys; print('no such config'); sys.exit(3)"]

    with pytest.raises(EngineError) as ei:
        Broken(tmp_path / "e", {"main": pick_ports(1)[0]}).start()
    assert "exited during start-up (code 3)" in str(ei.value)
    assert "no such config" in str(ei.value)


def test_not_ready_in_time_is_killed_and_reported(tmp_path):
    class Deaf(TinyEngine):
        def _check_ready(self):
            raise ConnectionRefusedError("still deaf")

    eng = Deaf(tmp_path / "e", {"main": pick_ports(1)[0]})
    with pytest.raises(EngineError) as ei:
        eng.start(timeout=2)
    assert "not ready within 2s" in str(ei.value) and "still deaf" in str(ei.value)
    # what to do next (a newcomer's first `make demo` on a busy machine: Kafka took over 90 s)
    assert "a busy machine can take longer: run the same command again" in str(ei.value)
    assert eng.pid is None and not eng.alive()


def test_sigterm_exit_code_other_than_expected_is_an_error(tmp_path):
    class Unclean(TinyEngine):
        def _command(self):  # exits 1 on SIGTERM: a server that failed to shut down
            return [sys.executable, "-c",
                    "import signal, sys, http.server as h\n"
                    "signal.signal(signal.SIGTERM, lambda *a: sys.exit(1))\n"
                    f"h.HTTPServer(('127.0.0.1', {self.ports['main']}), "
                    "h.SimpleHTTPRequestHandler).serve_forever()"]

    eng = Unclean(tmp_path / "e", {"main": pick_ports(1)[0]}).start()
    pid = eng.pid
    with pytest.raises(EngineError) as ei:
        eng.stop(timeout=5)
    assert "exited with code 1 on SIGTERM" in str(ei.value)
    assert not pid_alive(pid)


def test_kill_is_sigkill(tmp_path):
    class Stubborn(TinyEngine):
        def _command(self):
            return [sys.executable, "-c",
                    "import signal, http.server as h\n"
                    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                    f"h.HTTPServer(('127.0.0.1', {self.ports['main']}), "
                    "h.SimpleHTTPRequestHandler).serve_forever()"]

    eng = Stubborn(tmp_path / "e", {"main": pick_ports(1)[0]}).start()
    pid = eng.pid
    t0 = time.monotonic()
    eng.stop(timeout=1)  # ignores SIGTERM: SIGKILL after the timeout
    assert not pid_alive(pid) and time.monotonic() - t0 < 10
    assert signal.SIGKILL  # the only way it could have died


def test_a_recorded_engine_killed_after_the_timeout_is_named_in_the_warning(tmp_path, caplog):
    # `make down` stops engines by their recorded pid; on a busy machine one can outlast the
    # timeout and is SIGKILLed. The warning names it (was: "pid 13491 ignored signal 15 ...")
    class Stubborn(TinyEngine):
        def _command(self):
            return [sys.executable, "-c",
                    "import signal, http.server as h\n"
                    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                    f"h.HTTPServer(('127.0.0.1', {self.ports['main']}), "
                    "h.SimpleHTTPRequestHandler).serve_forever()"]

    eng = Stubborn(tmp_path / "e", {"main": pick_ports(1)[0]}).start()
    pid = eng.pid
    assert pid is not None
    try:
        recorded = Stubborn(eng.dir, eng.ports, pid)  # another process's view, as `make down` has
        with caplog.at_level("WARNING", logger="qim.dev._proc"):
            recorded.stop(timeout=1)
        assert _wait_gone(pid)
        assert f"tiny (pid {pid}) did not stop within 1 s of SIGTERM: killed it (SIGKILL)" in caplog.text, caplog.text
    finally:
        eng.kill()


def test_a_running_engine_not_ready_in_time_says_what_to_do(tmp_path):
    eng = TinyEngine(tmp_path / "e", {"main": pick_ports(1)[0]}).start()
    try:
        eng._check_ready = lambda: False  # alive, never ready: the adopted-and-still-booting path
        with pytest.raises(EngineError) as ei:
            eng.wait_ready(1)
        assert "not ready within 1s" in str(ei.value)
        assert "a busy machine can take longer: run the same command again" in str(ei.value)
    finally:
        eng.stop()
