"""`qim-dev engines up --shard-count 0` is refused (exit 2 naming the option), never taken
as the default 64. Nothing is started: the engines' installation is replaced by a function
that fails the test if the check lets the count through."""

from __future__ import annotations

import pytest

import qim.dev.engines as engines
from qim.dev.cli import main
from qim.errors import EngineError


@pytest.fixture(autouse=True)
def nothing_started(monkeypatch):
    def install():
        raise AssertionError("engines were about to be installed and started")

    monkeypatch.setattr(engines, "ensure_redis_installed", install)


@pytest.mark.parametrize("count", [0, 3])
def test_engine_set_refuses_a_count_that_is_not_a_power_of_two(count, tmp_path):
    with pytest.raises(EngineError, match=f"power of two, got {count}"):
        engines.EngineSet.up(tmp_path, shard_count=count)


def test_the_command_exits_2_naming_the_option(tmp_path, capsys):
    assert main(["engines", "up", "--dir", str(tmp_path), "--shard-count", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "qim-dev: error: --shard-count must be a power of two (1, 2, 4, ...), got 0"
