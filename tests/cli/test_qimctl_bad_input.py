"""qimctl on bad input (docs/operations.md): exit 2 and one line naming the option or
the variable, never a traceback. Nothing here reaches an engine: every case is refused
before a connection is tried."""

from __future__ import annotations

import pytest

from qim.cli.qimctl import main

HEX = "0123456789abcdef0123456789abcdef"
ADMIN = (["membership", "add", "--group", "5", "--user", "7"], ["membership", "remove", "--group", "5", "--user", "7"],
         ["message", "delete", "--conversation", HEX, "--message-id", HEX])


def run(argv, capsys) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    return code, err


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("QIM_TENANT_ID", "QIM_MAILBOX_SHARD_COUNT", "QIM_WRITER_ADDRS", "QIM_REDIS_ADDR",
                 "QIM_REGISTRY_REDIS_ADDR", "QIM_KAFKA_BOOTSTRAP"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("command", ADMIN, ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize("writer", ["nohostport", "x:y"])
def test_a_bad_writer_option_names_it(command, writer, capsys):
    for tls in (["--plaintext"], []):
        code, err = run(command + ["--writer", writer, *tls], capsys)
        assert code == 2
        assert err.splitlines() == [f"qimctl: error: --writer: bad address {writer!r}: expected host:port"]


@pytest.mark.parametrize("command", ADMIN + (["group", "create", "--group", "1", "--owner", "2"],),
                         ids=lambda c: " ".join(c[:2]))
def test_a_bad_writer_variable_names_it(command, monkeypatch, capsys):
    monkeypatch.setenv("QIM_WRITER_ADDRS", "bogus")
    code, err = run(command + ["--plaintext"], capsys)
    assert (code, err) == (2, "qimctl: error: QIM_WRITER_ADDRS: bad address 'bogus': expected host:port")


def test_a_port_out_of_range_is_named_so(capsys):
    code, err = run(["group", "create", "--group", "1", "--owner", "2", "--writer", "127.0.0.1:99999",
                     "--plaintext"], capsys)
    assert (code, err) == (2, "qimctl: error: --writer: bad address '127.0.0.1:99999': port 99999 is outside 0..65535")


def test_a_bad_registry_option_names_it(capsys):
    assert run(["shards", "--registry", "bogus"], capsys) == (
        2, "qimctl: error: --registry: bad address 'bogus': expected host:port")


@pytest.mark.parametrize("argv", [["token", "--user", "1", "--device", "1", "--key", "K"],
                                  ["membership", "add", "--group", "5", "--user", "7", "--plaintext"]])
def test_a_bad_tenant_variable_names_it(argv, monkeypatch, capsys):
    monkeypatch.setenv("QIM_TENANT_ID", "zz")
    assert run(argv, capsys) == (2, "qimctl: error: QIM_TENANT_ID='zz' is not an integer")


@pytest.mark.parametrize("argv", [["audit", "dispatch", "--no-wait", "--kafka-bootstrap", "127.0.0.1:1"],
                                  ["shards", "--registry", "127.0.0.1:1"]])
def test_a_bad_shard_count_variable_names_it(argv, monkeypatch, capsys):
    monkeypatch.setenv("QIM_MAILBOX_SHARD_COUNT", "abc")
    assert run(argv, capsys) == (2, "qimctl: error: QIM_MAILBOX_SHARD_COUNT='abc' is not an integer")


def test_a_bad_shard_count_option_names_it(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["shards", "--registry", "127.0.0.1:1", "--shard-count", "3"])
    assert exc.value.code == 2
    assert "argument --shard-count: '3' is not a power of two" in capsys.readouterr().err


@pytest.mark.parametrize("flags, wrong", [(["--group", "5", "--user", "3", "--user", "-7"], "--user -7"),
                                          (["--group", "0", "--user", "3"], "--group 0")])
def test_a_bad_member_id_names_only_the_wrong_option(flags, wrong, capsys):
    code, err = run(["membership", "add", *flags, "--plaintext"], capsys)
    assert (code, err) == (2, f"qimctl: error: {wrong} must be non-zero with bit 63 clear")
