"""CI budget of the in-process fuzz targets: 5 x 10^4 inputs in all, fixed seeds.

Each target runs in its own process under the deterministic driver (tests/fuzz/seeded.py:
the saved corpus, then seeded random and mutated inputs), so CI runs the same inputs
every time and never fails on a new random one; `make fuzz` explores with atheris
(coverage-guided) and random seeds. A finding fails the test with the reproducer's path
and the target's last output. QIM_FUZZ_CI_SCALE multiplies the budgets (e.g. 0.1 for a
quick local look); CI uses 1. The atheris engine of `make fuzz` gets a short run here
too, so that `make fuzz` keeps working.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# inputs per target: 5 x 10^4 together (10^5 until the CI run neared its 50-minute budget:
# every target and its whole saved corpus still run; `make fuzz` explores far more); the
# frame decoder (two twins, many shapes) gets most
BUDGET = {"frames": 15_000, "zstd": 10_000, "requests": 12_500, "backends": 12_500}
CI_SEED = 1
SUMMARY = re.compile(r"fuzz-target: target=(\w+) inputs=(\d+) findings=(\d+)")
EXECUTED = re.compile(r"stat::number_of_executed_units:\s*(\d+)")


def _run(module: str, target: str, work: Path, runs: int, seed: int, *extra: str,
         env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(ROOT), **(env_extra or {}))
    cmd = [sys.executable, "-m", module, target, "--runs", str(runs), "--seed", str(seed), "--work", str(work), *extra]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)


def _tail(out: str) -> str:
    return "\n".join([ln for ln in out.splitlines() if not ln.startswith("INFO: Instrumenting")][-40:])


@pytest.mark.parametrize("target", sorted(BUDGET))
def test_target_runs_its_budget_without_a_finding(target, tmp_path):
    runs = max(100, int(BUDGET[target] * float(os.environ.get("QIM_FUZZ_CI_SCALE", "1"))))
    proc = _run("tests.fuzz.seeded", target, tmp_path, runs, CI_SEED)
    out = proc.stdout + proc.stderr
    found = SUMMARY.findall(out)
    assert proc.returncode == 0 and found, f"fuzz target {target} found something (exit {proc.returncode})\n{_tail(out)}"
    _, inputs, findings = found[-1]
    assert int(findings) == 0 and int(inputs) >= runs, _tail(out)


def test_the_atheris_engine_of_make_fuzz_runs_a_target(tmp_path):
    proc = _run("tests.fuzz.engine", "frames", tmp_path, 2000, CI_SEED)
    out = proc.stdout + proc.stderr
    executed = EXECUTED.findall(out)
    assert proc.returncode == 0 and executed and int(executed[-1]) >= 2000, _tail(out)
    assert not list((tmp_path / "artifacts").iterdir())
    assert any((tmp_path / "corpus" / "frames").iterdir())  # coverage feedback kept inputs


@pytest.mark.parametrize("module", ["tests.fuzz.seeded", "tests.fuzz.engine"])
def test_a_finding_fails_the_run_and_leaves_a_reproducer(module, tmp_path):
    """The drivers themselves: a target that breaks is reported (exit non-zero, the
    input written, the Finding's message shown), so a green run means no finding."""
    proc = _run(module, "zstd", tmp_path, 50, CI_SEED, env_extra={"QIM_FUZZ_SELFTEST": "1"})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "self-test finding" in out, _tail(out)
    assert [p for p in tmp_path.rglob("*") if p.is_file() and ("crash" in p.name or "finding" in p.name)]
