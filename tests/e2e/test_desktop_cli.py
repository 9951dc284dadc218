"""qim-desktop and qimctl as a person uses them from a shell: mistakes print
one clear line and exit non-zero without a traceback; `qimctl token` and `qimctl group
create` work against the real stack."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from qim.sdk import Client
from qim.sdk.identity import open_store, store_path
from qim.wire.tokens import SigningKey
from tests.e2e.rawclient import sdk_transport
from tests.e2e.sdkclient import close_all
from tests.sdk.realstack import eventually, users

BIN = Path(sys.executable).parent


def run(tool: str, *args: str, env_extra=None, timeout: float = 60.0) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QIM_")}
    env.update(env_extra or {})
    return subprocess.run([str(BIN / tool), *args], capture_output=True, text=True, encoding="utf-8", env=env,
                          stdin=subprocess.DEVNULL, timeout=timeout)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


def one_line_error(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qim-desktop: error: "), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    for word in words:
        assert word in lines[0], lines[0]


def a_key_file(path: Path) -> str:
    """A development key of nobody's gateway, as a PEM file."""
    path.write_bytes(SigningKey.generate().private_pem())
    return str(path)


def test_closed_port_bad_address_and_missing_key_are_one_line(tmp_path):
    data = ["--data-dir", str(tmp_path)]
    key = a_key_file(tmp_path / "key.pem")
    one_line_error(run("qim-desktop", "--user", "5", "--key", key, "--endpoint", f"127.0.0.1:{closed_port()}",
                       *data), "cannot reach", "qim-gateway")
    one_line_error(run("qim-desktop", "--user", "5", "--key", key, "--endpoint", "localhost", *data),
                   "--endpoint", "host:port")
    one_line_error(run("qim-desktop", "--user", "5", "--key", key, "--endpoint", "no-such-host.invalid:7100",
                       *data), "cannot reach")
    one_line_error(run("qim-desktop", "--user", "5", *data), "QIM_DEV_TOKEN_KEY")
    one_line_error(run("qim-desktop", "--user", "5", "--key", str(tmp_path / "none.pem"), *data), "none.pem")
    one_line_error(run("qim-desktop", *data), "--user")
    one_line_error(run("qim-desktop", "--user", "-3", *data), "--user")
    one_line_error(run("qim-desktop", "--token", "not-a-token", *data), "--token")


def test_wrong_key_and_another_devices_store_are_one_line(stack, tmp_path):
    data = ["--data-dir", str(tmp_path), "--endpoint", stack.gateway_addr, "--ca-file", stack.ca_file]
    one_line_error(run("qim-desktop", "--user", "5", "--key", a_key_file(tmp_path / "wrong.pem"), *data),
                   "refused the token", "--key")
    token = run("qimctl", "token", "--user", "6", "--device", "1", "--key", stack.token_key).stdout.strip()
    other = run("qimctl", "token", "--user", "6", "--device", "2", "--key", stack.token_key).stdout.strip()
    # user 6's store in this data directory belongs to device 1; a token of device 2 is refused clearly
    open_store(store_path(stack.gateway_addr, 0, 6, str(tmp_path)), 0, 6, 1).close()
    assert token.startswith("eyJ") and token.count(".") == 2  # a JWT
    one_line_error(run("qim-desktop", "--token", other, *data), "belongs to device 1")


def test_help_texts_name_every_default():
    for tool, args in (("qim-desktop", ["--help"]), ("qimctl", ["token", "--help"]),
                       ("qimctl", ["group", "create", "--help"])):
        done = run(tool, *args)
        assert done.returncode == 0
        options = [line for line in done.stdout.splitlines() if line.startswith("  --")]  # argparse option rows, not wrapped help
        text = " ".join(done.stdout.split())
        assert options
        for line in options:
            flag = line.split()[0]
            assert f"{flag} " in done.stdout
        assert text.count("default") + text.count("required") >= len(options), done.stdout


async def test_qimctl_token_logs_in_and_group_create_is_seen_by_the_owner(stack, tmp_path):
    owner, member = users(2)
    gid = int.from_bytes(os.urandom(7), "big") + 1
    token = run("qimctl", "token", "--user", str(owner), "--device", "9",
                env_extra={"QIM_DEV_TOKEN_KEY": stack.token_key})
    assert token.returncode == 0 and token.stdout.count("\n") == 1 and token.stderr == ""
    c = await Client.open(stack.gateway_addr, token.stdout.strip(), data_dir=str(tmp_path), **sdk_transport(stack))
    await c.connect()
    assert c.device_id == 9
    env = stack.client_env()  # what sourcing stack.env gives: the writer, the CA, qimctl's certificate
    made = run("qimctl", "group", "create", "--group", str(gid), "--owner", str(owner), "--members", str(member),
               env_extra=env)
    assert made.returncode == 0 and "ok: conversation_id=" in made.stdout, made.stdout + made.stderr
    again = run("qimctl", "group", "create", "--group", str(gid), "--owner", str(owner), env_extra=env)
    assert again.returncode == 1 and "refused: CONFLICT" in again.stdout
    await eventually(lambda: any(x.group_id == gid for x in c.store.conversations()), what="group in the list")
    members = await c.members(gid)
    assert {(m.user_id, m.owner) for m in members} == {(owner, True), (member, False)}
    await close_all(c)
