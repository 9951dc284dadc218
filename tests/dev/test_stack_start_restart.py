"""A service that dies while `qim-dev stack up` starts the stack is the supervisor's to
restart: `stack up` waits for that restart, says so on the terminal, and succeeds
(qim/dev/start_watch.py; docs/operations.md "Supervision"). Before, it answered
"mailbox exited during start" and stopped everything the supervisor was restarting.
A service that keeps dying is refused with its last log lines.

Real engines of this module's own (a Redis and a Kafka: a second stack on the session's
engines would share its ShardRegistry and shards with the session's stack, which is up in
a full run, and this stack's mailbox would never own its shards) and real service
processes under a real supervisor. The death is a real SIGSEGV of the mailbox process, made by a sitecustomize
on the services' PYTHONPATH, once (a marker file in the stack directory), after every
service has its pid recorded: the moment the old wait had already read stack.json.
"""

from __future__ import annotations

import json
import os

import pytest

from qim.dev import progress
from qim.dev.stack import Stack
from qim.dev.supervisor import supervised_stack_up
from qim.errors import EngineError
from tests.fixtures import start_test_engines

HOOK = """
import json, os, signal, sys, time
if sys.orig_argv[-3:] == ["-m", "qim.app", "mailbox"]:
    mark = "mailbox-died-at-start"
    n = int(open(mark).read()) if os.path.exists(mark) else 0
    if n < {deaths}:
        open(mark, "w").write(str(n + 1))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until stack.json names every service's pid
            try:
                d = json.load(open("stack.json"))
                if d.get("supervisor") and set(d["pids"]) >= set(d["metrics"]):
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.05)
        time.sleep(1.0)  # stack up has read that stack.json by now (it polls every 0.2 s)
        os.kill(os.getpid(), signal.SIGSEGV)
"""


def _hooked(tmp_path, deaths: int) -> dict[str, str]:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK.format(deaths=deaths))
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH", "")) if p)}


@pytest.fixture(scope="module")
def own_engines(tmp_path_factory):
    """A Redis and a Kafka of this module's own (module docstring), stopped afterwards."""
    es = start_test_engines(tmp_path_factory.mktemp("restart-engines"), with_cassandra=False)
    yield es
    es.down()


@pytest.fixture
def said(monkeypatch):
    """The progress lines `stack up` prints (turned on as the CLI does)."""
    monkeypatch.setattr(progress, "_started", None)
    progress.enable("stack")
    yield
    monkeypatch.setattr(progress, "_started", None)


def test_stack_up_waits_for_the_supervisors_restart_of_a_service_dying_at_start(own_engines, tmp_path, said, capsys):
    sd = tmp_path / "stack"
    st = supervised_stack_up(sd, own_engines.env(), die_with_parent=True, extra_env=_hooked(tmp_path, 1))
    try:
        assert (sd / "mailbox-died-at-start").read_text() == "1"  # it did die once, during the start
        now = Stack.load(sd)
        assert now is not None and now.restarts.get("mailbox") == 1
        assert all(now.healthz(name)[0] == 200 for name in now.names)
        err = capsys.readouterr().err
        assert (
            "stack: mailbox died during start (killed by signal 11 (SIGSEGV)); the supervisor "
            "restarted it, restart 1 of at most 3 while starting"
        ) in err, err
        assert "stack: mailbox ready" in err
    finally:
        st.down()


def test_stack_up_gives_up_on_a_service_that_keeps_dying_with_its_log(own_engines, tmp_path, said):
    sd = tmp_path / "stack"
    with pytest.raises(EngineError) as caught:
        supervised_stack_up(sd, own_engines.env(), die_with_parent=True, extra_env=_hooked(tmp_path, 99))
    text = str(caught.value)
    assert text.startswith(
        "mailbox kept dying during start (killed by signal 11 (SIGSEGV); 4 restarts "
        "by the supervisor); its last log lines:\n"
    ), text
    assert "qim-dev supervisor: mailbox (pid" in text  # the service's log, with the supervisor's lines
    assert Stack.load(sd) is None  # everything stopped (stack.json removed by down)


BIND_LINE = ("qim-gateway: cannot start: cannot listen: [Errno 98] error while attempting to bind on "
             "address ('127.0.0.1', 7100): address already in use")


def test_a_port_taken_by_another_process_is_named_and_refused_at_the_first_restart(tmp_path):
    """The race after `stack up` replaced the taken ports (decision 0150): a service whose
    listener's address is in use is not restarted on it until the budget ends. The
    supervisor's line names the reason (listen_failure over the service's log), and the
    start's wait refuses at the first restart with it. A stack recorded by hand, no process."""
    from qim.dev.start_watch import IN_USE, listen_failure, wait_supervised

    sd = tmp_path / "stack"
    (sd / "logs").mkdir(parents=True)
    assert listen_failure(f"x started\n{BIND_LINE}\n") == f", {IN_USE} (127.0.0.1:7100)"
    earlier = f"{BIND_LINE}\n2026-01-01 00:00:00 qim-dev supervisor: gateway (pid 1) exit status 3\nstarted\n"
    assert listen_failure(earlier) == ""  # an earlier run's line says nothing about this one
    assert listen_failure("Traceback\nValueError: in use\n") == ""
    (sd / "stack.json").write_text(json.dumps({"env": {}, "metrics": {"gateway": "127.0.0.1:1"}, "pids": {},
                                               "instance_env": {}, "supervisor": 1, "restarts": {"gateway": 1}}))
    (sd / "logs" / "gateway.log").write_text(
        f"{BIND_LINE}\n2026-01-01 00:00:00 qim-dev supervisor: gateway (pid 42) exit status 3"
        f"{listen_failure(BIND_LINE)}; restart 1 in 0.5s\n")
    with pytest.raises(EngineError) as caught:
        wait_supervised(sd, lambda: True, timeout=5)
    text = str(caught.value)
    assert text.startswith(
        f"gateway could not listen during start (exit status 3, {IN_USE} (127.0.0.1:7100)): another "
        "process took the port after `stack up` checked it; stop that process or run `stack up` again"), text


TAKER = """
import os, socket, sys, time
if sys.orig_argv[-3:] == ["-m", "qim.app", "gateway"] and not os.path.exists("port-taken"):
    open("port-taken", "w").write("1")
    port = int(os.environ["QIM_GATEWAY_LISTEN"].rsplit(":", 1)[1])
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    s.listen()
    if os.fork() == 0:  # "another process" holds the port until the test releases it (60 s at most)
        deadline = time.monotonic() + 60
        while not os.path.exists("release") and time.monotonic() < deadline:
            time.sleep(0.1)
        os._exit(0)
    s.close()
"""


def test_a_real_gateway_losing_its_port_in_the_race_is_refused_with_the_reason(own_engines, tmp_path):
    """The same race with real processes: a process of the hook's own takes the gateway's
    port just before the gateway binds it (after every check); `stack up` stops at the
    gateway's first restart with the supervisor's reason, not after its budget."""
    sd = tmp_path / "stack"
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(TAKER)
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH", "")) if p)}
    try:
        with pytest.raises(EngineError) as caught:
            supervised_stack_up(sd, own_engines.env(), die_with_parent=True, extra_env=env)
    finally:
        (sd / "release").write_text("1")
    text = str(caught.value)
    assert text.startswith("gateway could not listen during start (exit status 3, its port is in use by "
                           "another process (127.0.0.1:"), text
    assert "restart 2" not in text  # refused at the first restart, not after the budget
    assert Stack.load(sd) is None  # everything stopped
