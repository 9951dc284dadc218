"""`make perf` starts every run on empty engines (qim/dev/perf_fresh.py): the data an
earlier run left is removed, and a directory whose recorded engines cannot be read is
refused, never removed under processes it could not stop. (The stop of recorded pids
is EngineSet.down's: tests/dev/test_engines.py.)"""

from __future__ import annotations

import pytest

from qim.dev.perf_fresh import fresh_engines
from qim.errors import EngineError


def test_an_earlier_runs_data_is_removed(tmp_path):
    d = tmp_path / "engines"
    (d / "redis" / "appendonlydir").mkdir(parents=True)
    (d / "redis" / "appendonlydir" / "appendonly.aof.1.incr.aof").write_bytes(b"*1\r\n$4\r\nPING\r\n")
    (d / "kafka").mkdir()
    fresh_engines(d)
    assert not d.exists()
    fresh_engines(d)  # nothing there: nothing to do
    assert not d.exists()


def test_unreadable_recorded_engines_are_refused_and_kept(tmp_path):
    d = tmp_path / "engines"
    (d / "redis").mkdir(parents=True)
    (d / "state.json").write_text("{not json")
    with pytest.raises(EngineError, match="corrupt"):
        fresh_engines(d)
    assert (d / "redis").is_dir() and (d / "state.json").exists()
