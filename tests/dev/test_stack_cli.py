"""`qim-dev stack` of one checkout: same addresses and token key across down/up, restart of
one service by its recorded pid, a remembered port another process took replaced by a
free one (decision 0150), and one-line errors for a user's mistakes.

Real engines and real service processes, started through the CLI as `make up` does,
under a tmp dir with their own ports.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys

from qim.dev._proc import pid_alive
from qim.dev.engines import EngineSet
from qim.dev.stack import Stack


def _cli(*args, timeout: float = 240, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qim.dev.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env} if env else None)


def _env(path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def _one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    return r.stderr


def test_down_up_keeps_addresses_and_token_key_and_restart_one_service(tmp_path):
    sd, ed = tmp_path / "stack", tmp_path / "engines"
    dirs = ("--dir", sd, "--engines-dir", ed)
    try:
        up = _cli("stack", "up", *dirs)
        assert up.returncode == 0, up.stderr
        env1 = _env(sd / "stack.env")
        ports1 = json.loads((sd / "ports.json").read_text())
        assert env1["QIM_DEV_TOKEN_KEY"] == str((sd / "dev_token_key.pem").resolve())
        assert stat.S_IMODE(os.stat(sd / "dev_token_key.pem").st_mode) == 0o600
        key_pem = (sd / "dev_token_key.pem").read_bytes()
        # TLS: the development CA clients trust, and qimctl's certificate
        assert env1["QIM_CA_FILE"] == str((sd / "tls" / "ca.crt").resolve())
        assert env1["QIM_QIMCTL_TLS_CERT"] == str((sd / "tls" / "qimctl.crt").resolve())
        ca_pem = (sd / "tls" / "ca.crt").read_bytes()
        assert env1["QIM_GATEWAY_ADDR"] == f"127.0.0.1:{ports1['gateway']}"

        supervisor = Stack.load(sd).supervisor  # `up` hands the services to a supervisor process
        assert supervisor is not None and pid_alive(supervisor)
        before = Stack.load(sd).pids
        rs = _cli("stack", "restart", "gateway", "--dir", sd)
        assert rs.returncode == 0, rs.stderr
        after = Stack.load(sd)
        assert after.pids["gateway"] != before["gateway"]
        assert not pid_alive(before["gateway"])
        assert {k: v for k, v in after.pids.items() if k != "gateway"} == \
            {k: v for k, v in before.items() if k != "gateway"}
        assert after.healthz("gateway")[0] == 200
        assert after.restarts.get("gateway", 0) == 0  # a requested restart is not a death
        assert f"gateway restarted: pid={after.pids['gateway']}" in rs.stdout
        assert _env(sd / "stack.env") == env1

        # `make down && make up`
        assert _cli("stack", "down", "--dir", sd).returncode == 0
        assert _cli("engines", "down", "--dir", ed).returncode == 0
        assert not any(pid_alive(p) for p in after.pids.values())
        assert not pid_alive(supervisor)  # `down` stopped it first, so nothing came back
        up2 = _cli("stack", "up", *dirs)
        assert up2.returncode == 0, up2.stderr
        assert _env(sd / "stack.env") == env1  # gateway, token key, writer and engine addresses
        assert (sd / "dev_token_key.pem").read_bytes() == key_pem  # tokens made before stay valid
        assert (sd / "tls" / "ca.crt").read_bytes() == ca_pem  # clients keep trusting the gateway
        assert json.loads((sd / "ports.json").read_text()) == ports1
    finally:
        _down(sd, ed)


def _down(sd, ed) -> None:
    """Stop the stack in `sd` and the engines in `ed` (by their recorded pids), if any."""
    st = Stack.load(sd)
    if st is not None:
        st.down()
    es = EngineSet.load(ed)
    if es is not None:
        es.down(timeout=5)


def test_remembered_port_taken_moves_to_a_free_port_said_in_one_line(tmp_path):
    """The newcomer's `make demo`: the gateway's remembered port is held by another
    process. Before, the gateway failed to bind and the supervisor restarted it until its
    budget ran out; now `stack up` gives it a free port, says so, and nothing restarts."""
    sd, ed = tmp_path / "stack", tmp_path / "engines"
    with socket.socket() as s:  # "another process": a listener of the test's own
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        sd.mkdir()
        (sd / "ports.json").write_text(json.dumps({"gateway": port}))
        try:  # the archive tier plays no part in the ports: no Cassandra to start
            r = _cli("stack", "up", "--dir", sd, "--engines-dir", ed, env={"QIM_DEV_WITH_CASSANDRA": "0"})
            assert r.returncode == 0, r.stderr
            moved = json.loads((sd / "ports.json").read_text())["gateway"]  # remembered from now on
            assert moved != port
            said = [line for line in r.stderr.splitlines() if str(port) in line]
            assert said == [f"stack: port {port} of gateway (QIM_GATEWAY_LISTEN) is in use by another process; "
                            f"gateway moves to port {moved} (remembered in {sd / 'ports.json'}; stack.env follows)"], r.stderr
            env = _env(sd / "stack.env")
            assert env["QIM_GATEWAY_ADDR"] == env["QIM_GATEWAY_ADDRS"] == f"127.0.0.1:{moved}"
            assert env["QIM_GATEWAY_WSS_ADDR"].startswith(f"wss://127.0.0.1:{moved}/")
            # the clients' local stores keep their name: the deployment is the remembered address
            assert env["QIM_DEPLOYMENT"] == f"127.0.0.1:{port}"
            st = Stack.load(sd)
            assert st.instance_env["gateway"]["QIM_GATEWAY_LISTEN"] == f"127.0.0.1:{moved}"
            assert all(st.healthz(name)[0] == 200 for name in st.names)
            assert st.restarts == {}  # nothing failed to bind, nothing was restarted
            assert "restart" not in (sd / "logs" / "supervisor.log").read_text()
        finally:
            _down(sd, ed)


def test_restart_without_a_stack_or_with_an_unknown_name(tmp_path):
    r = _cli("stack", "restart", "gateway", "--dir", tmp_path / "none")
    assert r.returncode == 1 and "no stack recorded" in r.stdout
    sd = tmp_path / "stack"
    sd.mkdir()
    (sd / "stack.json").write_text(json.dumps(
        {"env": {}, "metrics": {"gateway": "127.0.0.1:1"}, "pids": {}, "instance_env": {}}))
    err = _one_line_error(_cli("stack", "restart", "gatewya", "--dir", sd))
    assert "no service 'gatewya'" in err and "gateway" in err
    err = _one_line_error(_cli("stack", "restart", "--dir", sd))
    assert "needs a service name" in err


def test_corrupt_stack_state_and_ports_file_are_one_line_errors(tmp_path):
    sd = tmp_path / "stack"
    sd.mkdir()
    (sd / "stack.json").write_text("[1, 2")
    err = _one_line_error(_cli("stack", "status", "--dir", sd))
    assert "stack.json is corrupt" in err
    (sd / "stack.json").unlink()
    (sd / "ports.json").write_text('{"gateway": "x"}')
    err = _one_line_error(_cli("stack", "up", "--dir", sd, "--engines-dir", tmp_path / "e"))
    assert "ports.json is corrupt" in err
