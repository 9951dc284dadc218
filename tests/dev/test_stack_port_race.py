"""A fresh port taken by another process between the stack's layout and its service's
bind (a CI failure: a parallel test's process answered the mailbox's /healthz with 200
while the mailbox itself had exited with "cannot listen ... address already in use", so
the stack was "ready" without a mailbox and a client waited two minutes for a shard
owner). Services say their pid in X-Qim-Pid; wait_ready refuses an answer from a process
outside the stack's directory (PortTaken), and stack_up lays the stack out again with
other ports (docs/decisions/0155)."""

from __future__ import annotations

import http.server
import os
import threading
import time

import pytest

import qim.dev.stack as stack_mod
from qim.dev.stack import Stack
from qim.dev.stack_race import PortTaken
from qim.dev.stack_race import port_race as _port_race
from qim.errors import EngineError


class _Healthz(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 — http.server's name
        self.send_response(200)
        self.send_header("X-Qim-Pid", str(os.getpid()))  # this pytest process: not of the stack
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, *args) -> None:
        pass


def test_an_answer_from_a_process_outside_the_stack_is_port_taken(tmp_path):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Healthz)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        st = Stack(tmp_path, {}, {"mailbox": f"127.0.0.1:{httpd.server_address[1]}"})
        assert st._answered_by_another("mailbox") == os.getpid()
        st.pids["mailbox"] = os.getpid()
        st.alive = lambda name: True  # the stack's own process is still starting
        with pytest.raises(PortTaken, match="answered for another process"):
            st.wait_ready(timeout=5)
    finally:
        httpd.shutdown()


def test_which_start_failures_are_a_port_race():
    assert _port_race(PortTaken("x"))
    assert _port_race(EngineError("mailbox exited during start:\nqim-mailbox: cannot start: cannot listen: "
                                  "[Errno 98] error while attempting to bind ...: address already in use"))
    assert not _port_race(EngineError("mailbox not ready after 90s (503 starting)"))


def test_stack_up_lays_the_stack_out_again_after_a_port_race(tmp_path, monkeypatch):
    plans: list = []
    real_plan = stack_mod.plan_stack

    def plan(*args, **kw):
        plans.append(1)
        return real_plan(*args, **kw)

    def start_service(self, name, extra_env=None):
        return 0

    def wait_ready(self, names=None, timeout=0):
        if len(plans) == 1:
            raise PortTaken("mailbox: its /healthz port answered for another process (pid 1)")

    monkeypatch.setattr(stack_mod, "plan_stack", plan)
    monkeypatch.setattr(Stack, "start_service", start_service)
    monkeypatch.setattr(Stack, "wait_ready", wait_ready)
    monkeypatch.setattr(Stack, "down", lambda self: None)
    env = {"QIM_REDIS_ADDR": "127.0.0.1:1", "QIM_KAFKA_BOOTSTRAP": "127.0.0.1:2"}
    stack_mod.stack_up(tmp_path / "s", env)
    assert len(plans) == 2  # laid out again once, then ready


def test_a_service_says_its_pid_on_healthz(stack):
    import urllib.request

    name = stack.names[0]
    with urllib.request.urlopen(f"http://{stack.metrics[name]}/healthz", timeout=5) as r:
        assert r.status == 200 and int(r.headers["X-Qim-Pid"]) == stack.pids[name]
    assert stack._answered_by_another(name) == 0  # its own process answered


def test_stopping_a_name_the_stack_does_not_run_is_an_error(tmp_path):
    # a crash test naming "gateway1" (the first gateway is "gateway") passed having
    # crashed nothing: stop and kill refuse a name that is not one of the stack's
    st = Stack(tmp_path, {}, {"gateway": "127.0.0.1:1", "gateway2": "127.0.0.1:2"})
    for act in (st.kill_service, st.stop_service):
        with pytest.raises(EngineError, match="no service 'gateway1' in this stack; it has gateway, gateway2"):
            act("gateway1")
    st.stop_service("gateway2")  # a service of the stack that is not running: only reaped, no error


class _AnswersThenHangs(http.server.BaseHTTPRequestHandler):
    """503 with its reasons once, then no answer within the probe's second (a service
    whose event loop stopped after it said why it was not ready)."""
    calls = 0

    def do_GET(self) -> None:  # noqa: N802 — http.server's name
        type(self).calls += 1
        if type(self).calls > 1:
            time.sleep(1.5)
        self.send_response(503)
        self.end_headers()
        self.wfile.write(b"not ready: shard leases 0 of 64\n")

    def log_message(self, *args) -> None:
        pass


def test_not_ready_names_the_last_answer_when_the_last_probe_got_none(tmp_path):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AnswersThenHangs)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        st = Stack(tmp_path, {}, {"session": f"127.0.0.1:{httpd.server_address[1]}"})
        st.pids["session"] = os.getpid()
        st.alive = lambda name: True
        with pytest.raises(EngineError) as err:
            st.wait_ready(timeout=2)
        said = str(err.value).splitlines()[0]
        assert said.startswith("session not ready after 2s (0 ") and \
            said.endswith("; its last answer: 503 not ready: shard leases 0 of 64):"), said
    finally:
        httpd.shutdown()
