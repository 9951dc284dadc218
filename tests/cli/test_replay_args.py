"""`qim-loadgen replay`: bad options give one line naming the option and exit 2 before
anything connects; a gateway that takes no login stops the run at once with one line
(exit 1) instead of failing every dialogue's setup and checks. No gateway runs here."""

from __future__ import annotations

import pytest

from qim.cli import loadgen
from tests.cli.conftest import one_line

pytestmark = pytest.mark.usefixtures("no_gateway_env")


def test_replay_stops_at_once_when_no_login_succeeds(key_file, dead, capsys):
    argv = ["replay", "--gateway", dead, "--token-key", key_file, "--limit", "4", "--plaintext", "--no-progress"]
    assert loadgen.main(argv) == 1
    captured = capsys.readouterr()
    assert captured.err == f"qim-loadgen replay: cannot reach {dead}: ConnectionRefusedError " \
                           "(is qim-gateway listening there?)\n", captured.err
    assert "unread_wrong" not in captured.out  # no verdict on users that never connected


@pytest.mark.parametrize("extra,message", [
    (["--limit", "-1"], "--limit must be >= 0, got -1"),
    (["--concurrency", "0"], "--concurrency must be >= 1, got 0"),
    (["--group-every", "-1"], "--group-every must be >= 0, got -1"),
    (["--sync-timeout", "-1"], "--sync-timeout must be a finite number > 0, got -1"),
    (["--langs", ""], "--langs names no language (the corpus has: "),
    (["--langs", "english,klingon"], "--langs has no corpus language 'klingon' (the corpus has: "),
])
def test_replay_refuses_bad_options_up_front(extra, message, key_file, dead, capsys):
    assert loadgen.main(["replay", "--gateway", dead, "--token-key", key_file, "--plaintext", *extra]) == 2
    err = one_line(capsys, f"qim-loadgen replay: {message}")
    if "corpus has" in message:
        assert "english" in err  # the message lists what there is
