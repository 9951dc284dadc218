"""`qim-loadgen rate|room|replay`: bad options and an unreachable gateway give one line
naming the option or the address and a non-zero exit (2 for bad arguments), before
anything connects; never a traceback, never a quiet success. No gateway runs here: the
"dead gateway" is a loopback port nothing listens on."""

from __future__ import annotations

import pytest

from qim.cli import loadgen
from tests.cli.conftest import one_line

pytestmark = pytest.mark.usefixtures("no_gateway_env")


@pytest.mark.parametrize("command", ["rate", "room"])
def test_a_dead_gateway_is_one_line_naming_it(command, key_file, dead, capsys):
    argv = [command, "--gateway", dead, "--token-key", key_file, "--duration", "1", "--plaintext"]
    argv += ["--rate", "5"] + (["--members", "2"] if command == "room" else ["--sdk-clients", "0"])
    assert loadgen.main(argv) == 1
    err = one_line(capsys, f"qim-loadgen {command}: cannot reach {dead}: ConnectionRefusedError")
    assert "is qim-gateway listening there?" in err


RATE_BAD = [
    (["--group-members", "-3"], "--group-members must be 2..1000, got -3"),
    (["--group-members", "1"], "--group-members must be 2..1000, got 1"),
    (["--pull-gap", "-1"], "--pull-gap must be a finite number >= 0, got -1"),
    (["--drain", "-1"], "--drain must be a finite number >= 0, got -1"),
    (["--rate", "nan"], "--rate must be a finite number > 0, got nan"),
    (["--rate", "inf"], "--rate must be a finite number > 0, got inf"),
    (["--rate", "0"], "--rate must be a finite number > 0, got 0"),
    (["--duration", "-2"], "--duration must be a finite number > 0, got -2"),
    (["--pairs", "0"], "--pairs must be >= 1, got 0"),
    (["--min-arrival", "1.5"], "--min-arrival must be 0..1, got 1.5"),
    (["--min-arrival", "nan"], "--min-arrival must be 0..1, got nan"),
    (["--size", "8"], "--size must be >= 16, got 8"),
    (["--json", "/nonexistent/dir/x.json"], "--json '/nonexistent/dir/x.json': directory '/nonexistent/dir' "
                                            "does not exist"),
]


@pytest.mark.parametrize("extra,message", RATE_BAD)
def test_rate_refuses_bad_options_up_front(extra, message, key_file, dead, capsys):
    argv = ["rate", "--gateway", dead, "--token-key", key_file, "--rate", "5", "--plaintext", *extra]
    assert loadgen.main(argv) == 2  # 2, not 1: nothing was tried (the gateway is dead anyway)
    assert one_line(capsys, "qim-loadgen rate: ") == f"qim-loadgen rate: {message}\n"


def test_room_takes_the_gateway_list_like_rate(key_file, dead, monkeypatch, capsys):
    monkeypatch.setenv("QIM_GATEWAY_ADDR", "bogus")
    assert loadgen.main(["room", "--token-key", key_file, "--plaintext"]) == 2
    one_line(capsys, "qim-loadgen room: --gateway: bad address 'bogus'")
    assert loadgen.main(["room", "--gateway", "bogus", "--token-key", key_file, "--plaintext"]) == 2
    one_line(capsys, "qim-loadgen room: --gateway: bad address 'bogus'")
    monkeypatch.setenv("QIM_GATEWAY_ADDRS", dead)  # preferred over QIM_GATEWAY_ADDR, as rate and replay do
    assert loadgen.main(["room", "--token-key", key_file, "--plaintext", "--members", "2"]) == 1
    one_line(capsys, f"qim-loadgen room: cannot reach {dead}")


@pytest.mark.parametrize("extra,message", [
    (["--drain", "-1"], "--drain must be a finite number >= 0, got -1"),
    (["--rate", "nan"], "--rate must be a finite number > 0, got nan"),
    (["--json", "/nonexistent/x.json"], "--json '/nonexistent/x.json': directory '/nonexistent' does not exist"),
])
def test_room_refuses_bad_options_up_front(extra, message, key_file, dead, capsys):
    assert loadgen.main(["room", "--gateway", dead, "--token-key", key_file, "--plaintext", *extra]) == 2
    assert one_line(capsys, "qim-loadgen room: ") == f"qim-loadgen room: {message}\n"


@pytest.mark.parametrize("command", ["replay", "rate", "room"])
def test_every_command_takes_the_shared_options_and_names_them_alike(command, key_file, capsys):
    """The shared options are written once (qim/cli/loadgen_args.py): each command
    offers --gateway, --token-key, --ca-file and --plaintext, and one without a gateway
    says the same line, naming the variable the default is read from first."""
    extra = ["--rate", "5"] if command == "rate" else []
    assert loadgen.main([command, "--token-key", key_file, "--plaintext", *extra]) == 2
    assert one_line(capsys, f"qim-loadgen {command}: ") == (
        f"qim-loadgen {command}: --gateway/QIM_GATEWAY_ADDRS and --token-key/QIM_DEV_TOKEN_KEY are required\n")
    with pytest.raises(SystemExit):
        loadgen.main([command, "--help"])
    usage = capsys.readouterr().out
    assert all(option in usage for option in ("--gateway", "--token-key", "--ca-file", "--plaintext"))
