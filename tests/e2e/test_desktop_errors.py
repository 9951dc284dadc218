"""qim-desktop's one-line errors say what went wrong and what to do: an
expired token and a wrong key get different lines, `--plaintext` toward a TLS gateway
says the gateway expects TLS, an internal service port says it is not the client port
(not "check --ca-file"), one's own id as --chat is refused before connecting; `qimctl
token --name` puts a display name in the token. Real processes against the real stack."""

from __future__ import annotations

import time

import jwt

from qim.wire.devtoken import issue_dev_token
from tests.e2e.test_desktop_cli import a_key_file, one_line_error, run


def test_expired_token_and_wrong_key_are_told_apart(stack, tmp_path):
    data = ["--data-dir", str(tmp_path), "--endpoint", stack.gateway_addr, "--ca-file", stack.ca_file]
    expired = issue_dev_token(stack.token_key, 0, 41, 1, ttl_s=60, now=int(time.time()) - 600)
    done = run("qim-desktop", "--token", expired, *data)
    one_line_error(done, "refused the token: token expired", "qimctl token")
    wrong = run("qim-desktop", "--user", "42", "--key", a_key_file(tmp_path / "other.pem"), *data)
    one_line_error(wrong, "refused the token", "another key", "--key")
    assert "expired" not in wrong.stderr and done.stderr.splitlines()[0] != wrong.stderr.splitlines()[0]


def test_plaintext_to_tls_and_an_internal_port_say_what_they_are(stack, tmp_path):
    key = ["--key", stack.token_key, "--data-dir", str(tmp_path)]
    plain = run("qim-desktop", "--user", "43", "--plaintext", "--endpoint", stack.gateway_addr, *key)
    one_line_error(plain, "before answering AUTH", "expects TLS", "--plaintext")
    assert "closed by server" not in plain.stderr
    writer = stack.client_env()["QIM_WRITER_ADDRS"].split(",")[0]
    internal = run("qim-desktop", "--user", "44", "--endpoint", writer, "--ca-file", stack.ca_file, *key)
    one_line_error(internal, "client port")
    assert "--ca-file" not in internal.stderr


def test_own_id_as_chat_is_refused_before_connecting(tmp_path):
    key = a_key_file(tmp_path / "k.pem")
    one_line_error(run("qim-desktop", "--user", "45", "--key", key, "--chat", "45", "--data-dir", str(tmp_path),
                       "--endpoint", "127.0.0.1:1"), "--chat 45 is your own user id")


def test_qimctl_token_name_is_a_claim_and_a_bad_one_is_refused(tmp_path):
    key = a_key_file(tmp_path / "k.pem")
    done = run("qimctl", "token", "--user", "46", "--device", "1", "--name", "Zoë  李", "--key", key)
    assert done.returncode == 0, done.stderr
    assert jwt.decode(done.stdout.strip(), options={"verify_signature": False})["name"] == "Zoë 李"
    bad = run("qimctl", "token", "--user", "46", "--device", "1", "--name", "\x1b[31mred", "--key", key)
    assert bad.returncode == 2 and "control" in bad.stderr and bad.stdout == ""
