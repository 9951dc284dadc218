"""`make perf PERF_REDIS=N` (issue 35 section 1, decision 0098): the same measurement
with one Redis and with N standalone instances (qim/dev/redis_instances.py), each on a
private stack of its own (`.perf/redis1`, `.perf/redisN`, each with its perf.json and
perf.png), one after the other. Printed on stdout:

    perf[redis=1]: max_rate=… …              (the usual line of each run)
    perf[redis=3]: max_rate=… …
    perf-redis: redis=1 max_rate=… cpu_ms_per_msg=… redis_cpu_ms_per_msg=… | redis=3 …

`redis_cpu_ms_per_msg` is the CPU of every Redis instance together per message ACKed, at
the step `cpu_ms_per_msg` is read from (perf_report.cpu_at). On one machine the N
instances share its cores with every service and the load generator: the comparison
shows what the split costs or saves in CPU per message and whether one Redis was the
bound there; the scale-out itself (an instance per core or host) is docs/capacity.md's.
The connection step (PERF_CONNECTIONS) has no Redis in it: it runs with the first only.
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path
from typing import Callable, Optional

from qim.dev.perf_report import CPU_AT_RATE, Step, _fmt, _nearest, cpu_at, max_rate

RunOne = Callable[[argparse.Namespace], tuple[int, Optional[str], list[Step], list[Step]]]


def redis_cpu_at(steps: list[Step], rate: float = CPU_AT_RATE) -> Optional[float]:
    """CPU ms per message of every Redis instance together ("redis", "redis2", ...) at the
    step cpu_at reads (None without a step that ACKed anything)."""
    best = _nearest(steps, rate)
    if best is None:
        return None
    return round(sum(v for name, v in best.cpu_ms.items() if name.startswith("redis")), 3)


def side_by_side(results: list[tuple[int, list[Step], list[Step]]]) -> str:
    """The `perf-redis:` line of [(instances, steps, holds)]."""
    return "perf-redis: " + " | ".join(
        f"redis={n} max_rate={max_rate(holds):g} cpu_ms_per_msg={_fmt(cpu_at(steps))} "
        f"redis_cpu_ms_per_msg={_fmt(redis_cpu_at(steps))}" for n, steps, holds in results)


def compare(cfg: argparse.Namespace, run_one: RunOne) -> int:
    """Run the measurement with 1 and with `cfg.redis` instances (module doc); the exit
    code of the first run that did not end 0, else 0."""
    results = []
    for i, n in enumerate((1, cfg.redis)):
        one = copy.copy(cfg)
        one.redis, one.out = n, str(Path(cfg.out) / f"redis{n}")
        if i:
            one.connections = 0  # no Redis in the connection step: measured once
        code, line, steps, holds = run_one(one)
        if code or line is None:
            return code or 1
        print(f"perf[redis={n}]: {line.removeprefix('perf: ')}", flush=True)
        results.append((n, steps, holds))
    print(side_by_side(results), flush=True)
    return 0
