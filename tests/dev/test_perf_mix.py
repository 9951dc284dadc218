"""PERF_MIX (issue 37 "Load"): `make perf` passes a checked `--mix` to every
`qim-loadgen rate` step, and a step's operations count the REACT and TYPING answered
(qim/cli/loadgen_mix.py) besides the ACKed messages."""

from __future__ import annotations

import pytest

from qim.dev.perf_args import PerfArgError, options
from qim.dev.perf_report import Step


def test_perf_mix_is_checked_and_kept(tmp_path):
    out = str(tmp_path / "perf")
    assert options(["--out", out], environ={}).mix is None
    cfg = options(["--out", out], environ={"PERF_MIX": "reactions=0.3,typing=0.2"})
    assert cfg.mix == "reactions=0.3,typing=0.2"
    with pytest.raises(PerfArgError, match="PERF_MIX must be"):
        options(["--out", out], environ={"PERF_MIX": "likes=0.5"})
    with pytest.raises(PerfArgError, match="--mix must be"):
        options(["--out", out, "--mix", "reactions=0.9,typing=0.9"], environ={})


def test_step_operations_count_react_and_typing():
    report = {"total": {"acked": 100}, "sdk": {"acked": 10},
              "mix": {"reactions": {"sent": 30, "acked": 30, "refused": 0},
                      "typing": {"sent": 20, "acked": 5, "refused": 0}, "typing_throttled": 15}}
    assert Step(100, 30, report, {}).acked == 100 + 10 + 30 + 5 + 15
    assert Step(100, 30, {"total": {"acked": 100}}, {}).acked == 100  # no --mix: messages only
