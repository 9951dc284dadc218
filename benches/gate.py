"""The gate of `make bench`: floors of compiled/pure ratios and regressions of hot
functions against a committed baseline (benches/floors.toml explains both figures).

Pure logic over a pytest-benchmark JSON document, so tests can feed it a crafted one
(tests/cli/test_bench_gate.py). benches/report.py prints the table and calls `verdict`.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections import defaultdict
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
FLOORS_FILE = HERE / "floors.toml"
BASELINE_FILE = HERE / "baseline.json"
REFERENCE_GROUP = "reference"


class GateError(ValueError):
    """A floors or baseline file that cannot be read, or a run without the reference bench."""


def load_floors(path: Path = FLOORS_FILE) -> tuple[dict[str, float], float, float]:
    """({group: floor ratio}, regression margin, smallest baseline ratio judged) from
    floors.toml; GateError if malformed."""
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        floors = {str(k): float(v) for k, v in doc["floors"].items()}
        margin = float(doc["regression"]["margin"])
        min_ratio = float(doc["regression"]["min_ratio"])
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise GateError(f"{path}: {exc.__class__.__name__}: {exc}") from exc
    if margin <= 0 or min_ratio < 0 or any(f <= 0 for f in floors.values()):
        raise GateError(f"{path}: floors and margin must be positive")
    return floors, margin, min_ratio


def bench_key(bench: dict) -> tuple[str, str, Optional[str]]:
    """(group, bench id without the impl parameter, impl or None)."""
    params = dict(bench.get("params") or {})
    impl = params.pop("impl", None)
    rest = ",".join(f"{k}={v}" for k, v in sorted(params.items()))
    return bench["group"], bench["name"].split("[")[0] + (f"[{rest}]" if rest else ""), impl


def pairs(doc: dict) -> dict[tuple[str, str], dict[str, float]]:
    """(group, bench id) -> {"pure": min s, "compiled": min s} (the reference left out)."""
    out: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for bench in doc["benchmarks"]:
        group, name, impl = bench_key(bench)
        if group != REFERENCE_GROUP and impl is not None:
            out[(group, name)][impl] = bench["stats"]["min"]
    return out


def group_ratios(table: dict[tuple[str, str], dict[str, float]]) -> dict[str, float]:
    """Geometric mean of pure/compiled per group (how many times faster compiled is)."""
    logs: dict[str, list[float]] = defaultdict(list)
    for (group, _), runs in table.items():
        logs[group].append(math.log(runs["pure"] / runs["compiled"]))
    return {g: math.exp(sum(v) / len(v)) for g, v in logs.items()}


def hot_ratios(doc: dict) -> dict[str, float]:
    """"group/bench id" -> compiled fastest round / reference fastest round (lower is
    faster). GateError when the run has no reference bench."""
    ref = [b["stats"]["min"] for b in doc["benchmarks"] if b["group"] == REFERENCE_GROUP]
    if not ref:
        raise GateError("the run has no reference bench (benches/bench_reference.py)")
    out = {}
    for (group, name), runs in pairs(doc).items():
        if "compiled" in runs:
            out[f"{group}/{name}"] = runs["compiled"] / min(ref)
    return out


def verdict(groups: dict[str, float], hot: dict[str, float], floors: dict[str, float],
            baseline: dict[str, float], margin: float, min_ratio: float = 0.0) -> list[str]:
    """One message per failure, naming the figure: a group below its floor (or without
    results), or a hot function whose reference ratio grew by more than `margin` over
    the baseline. Not judged for regression: benches missing from the baseline (new
    ones) and those whose baseline ratio is below `min_ratio` (calls so short that the
    call itself and the timer dominate; their group floor still applies)."""
    failures = []
    for group, floor in sorted(floors.items()):
        got = groups.get(group)
        if got is None:
            failures.append(f"{group}: no results (floor {floor:g}x)")
        elif got < floor:
            failures.append(f"{group}_x={got:.1f} below its floor {floor:g}x (benches/floors.toml)")
    for name, ratio in sorted(hot.items()):
        base = baseline.get(name)
        if base is not None and base >= min_ratio and ratio > base * (1 + margin):
            failures.append(f"{name} regressed: {ratio:.2f}x the reference, baseline {base:.2f}x "
                            f"(+{(ratio / base - 1) * 100:.0f} % > {margin * 100:.0f} %)")
    return failures


def load_baseline(path: Path = BASELINE_FILE) -> dict[str, float]:
    """{"group/bench id": ratio to the reference}; GateError if missing or malformed."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        return {str(k): float(v) for k, v in doc["ratios"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise GateError(f"{path}: {exc.__class__.__name__}: {exc} (make bench-baseline writes it)") from exc


def save_baseline(hot: dict[str, float], path: Path = BASELINE_FILE) -> None:
    """Write the baseline file: the ratios and how they were measured."""
    doc = {"comment": "compiled bench fastest round / reference bench fastest round, same run "
                      "(benches/floors.toml, benches/bench_reference.py); rewritten by make bench-baseline",
           "ratios": {k: round(v, 3) for k, v in sorted(hot.items())}}
    Path(path).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
