"""Turn a pytest-benchmark JSON file into compiled-vs-pure ratios.

Usage: python benches/report.py BENCH.json
Pairs every bench's "pure" and "compiled" runs (same group, test and other
parameters), prints one row per pair (fastest round of each, ratio = pure / compiled,
i.e. how many times faster compiled is), then one figure per group: the geometric mean
of its ratios. The fastest round is used rather than the median because the two runs
of a pair are timed one after the other on a shared machine: other load only ever adds
time, and the minimum of many rounds is the figure it disturbs least.
The last line is exactly `bench: frame_stream_x=… watermark_x=… eventgroup_x=…`.
Exits 1 when a bench lacks one of its two runs or a headline group is missing.
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict

HEADLINE = ("frame_stream", "watermark", "eventgroup")


def pairs(doc: dict) -> dict[tuple[str, str], dict[str, float]]:
    """(group, bench id without impl) -> {"pure": min s, "compiled": min s}."""
    out: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for bench in doc["benchmarks"]:
        params = dict(bench.get("params") or {})
        impl = params.pop("impl")
        rest = ",".join(f"{k}={v}" for k, v in sorted(params.items()))
        name = bench["name"].split("[")[0] + (f"[{rest}]" if rest else "")
        out[(bench["group"], name)][impl] = bench["stats"]["min"]
    return out


def group_ratios(table: dict[tuple[str, str], dict[str, float]]) -> dict[str, float]:
    """Geometric mean of pure/compiled per group."""
    logs: dict[str, list[float]] = defaultdict(list)
    for (group, _), runs in table.items():
        logs[group].append(math.log(runs["pure"] / runs["compiled"]))
    return {g: math.exp(sum(v) / len(v)) for g, v in logs.items()}


def main(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        table = pairs(json.load(f))
    broken = [key for key, runs in table.items() if set(runs) != {"pure", "compiled"}]
    if broken:
        print(f"bench: missing pure or compiled run for {broken}", file=sys.stderr)
        return 1
    print(f"{'group':13} {'bench (fastest round)':38} {'pure µs':>10} {'compiled µs':>12} "
          f"{'ratio':>7}")
    for (group, name), runs in sorted(table.items()):
        p, c = runs["pure"] * 1e6, runs["compiled"] * 1e6
        print(f"{group:13} {name:38} {p:10.2f} {c:12.3f} {p / c:6.1f}x")
    ratios = group_ratios(table)
    missing = [g for g in HEADLINE if g not in ratios]
    if missing:
        print(f"bench: no results for {missing}", file=sys.stderr)
        return 1
    others = " ".join(f"{g}_x={r:.1f}" for g, r in sorted(ratios.items()) if g not in HEADLINE)
    print(f"other groups: {others}")
    print("bench: " + " ".join(f"{g}_x={ratios[g]:.1f}" for g in HEADLINE))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
