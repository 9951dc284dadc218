"""Turn a pytest-benchmark JSON file into compiled-vs-pure ratios and gate them.

Usage: python benches/report.py BENCH.json [--update-baseline]
Pairs every bench's "pure" and "compiled" runs (same group, test and other
parameters), prints one row per pair (fastest round of each, ratio = pure / compiled,
i.e. how many times faster compiled is), then one figure per group: the geometric mean
of its ratios. The fastest round is used rather than the median because the two runs
of a pair are timed one after the other on a shared machine: other load only ever adds
time, and the minimum of many rounds is the figure it disturbs least.
Then the gate (benches/gate.py): every group at or above its floor in
benches/floors.toml, and every compiled bench within the stated margin of its ratio to
the reference bench in benches/baseline.json. `--update-baseline` rewrites the baseline
from this run instead of judging regressions (floors still apply).
The last line is exactly `bench: frame_stream_x=… watermark_x=… eventgroup_x=…`; a
failure is printed before it (stderr, naming the figure) and the exit code is 1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gate import (  # noqa: E402 - benches/ is not a package
    GateError,
    group_ratios,
    hot_ratios,
    load_baseline,
    load_floors,
    pairs,
    save_baseline,
    verdict,
)

HEADLINE = ("frame_stream", "watermark", "eventgroup")


def main(path: str, update: bool = False) -> int:
    """Print the table, gate it; 0 when the gate holds, 1 otherwise."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    table = pairs(doc)
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
    try:
        floors, margin, min_ratio = load_floors()
        hot = hot_ratios(doc)
        if update:
            save_baseline(hot)
            print(f"baseline: {len(hot)} hot functions written to benches/baseline.json")
        failures = verdict(ratios, hot, floors, {} if update else load_baseline(), margin, min_ratio)
    except GateError as exc:
        print(f"bench: gate broken: {exc}", file=sys.stderr)
        failures = [str(exc)]
    others = " ".join(f"{g}_x={r:.1f}" for g, r in sorted(ratios.items()) if g not in HEADLINE)
    print(f"other groups: {others}")
    for msg in failures:
        print(f"bench gate FAILED: {msg}", file=sys.stderr)
    sys.stderr.flush()
    print("bench: " + " ".join(f"{g}_x={ratios[g]:.1f}" for g in HEADLINE), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    update = "--update-baseline" in args
    args = [a for a in args if a != "--update-baseline"]
    if len(args) != 1:
        sys.exit(__doc__)
    sys.exit(main(args[0], update))
