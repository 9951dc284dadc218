"""Idle CPU and CPU per message of the engines and services, two code trees in one run.

    .venv/bin/python benches/engines_ab.py --base /tmp/base --rate 300 --seconds 30 \
        --idle 60 [--archive] [--out /tmp/ab]

For each tree in turn (`base`: a `git archive` of the older commit with the compiled
`qim/_core` modules copied in, put first on PYTHONPATH; `branch`: this checkout), that
tree's engines (Redis, Kafka, and Cassandra with `--archive`: its own settings) and
services are started, left `--settle` s, measured `--idle` s without traffic, driven by
`qim-loadgen rate` (this checkout's) at `--rate` msg/s for `--seconds` s, and stopped. Every figure is CPU seconds (utime +
stime from /proc/PID/stat, all threads) of each process: idle in ms per second of wall
time, load in ms per message ACKed (the load generator's rusage apart), the archiver
also per message it wrote; per message is per message the writer committed (Outbox
records), which a loaded machine's slow ACKs do not change. On a shared machine other load only adds CPU to a process
through cache and scheduler effects, so the figures are upper bounds; compare the two
trees of the same run, never figures of different runs. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from qim.dev.engines import EngineSet
from qim.dev.perf_report import Step, read_cpu_s
from qim.dev.stack import stack_up


def metric(stack, service: str, name: str) -> float:
    """The sum of one metric's samples at `service`'s /metrics (0 when absent)."""
    with urllib.request.urlopen(f"http://{stack.metrics[service]}/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(float(line.rpartition(" ")[2]) for line in text.splitlines()
               if line.startswith(name) and not line.startswith("#"))


def cpu(pids: dict[str, int]) -> dict[str, float]:
    """CPU seconds of every process now."""
    return {n: read_cpu_s(p) for n, p in pids.items()}


def outbox_end(engines) -> int:
    """The Outbox's high watermark: how many records the writers committed so far."""
    from qim.consts import OUTBOX_TOPIC
    from qim.infra.kafka.consumer import AsyncConsumer

    async def read() -> int:
        c = AsyncConsumer(engines.kafka_bootstrap, "qim-engines-ab")
        try:
            return (await c.high_watermarks(OUTBOX_TOPIC, [0]))[0]
        finally:
            await c.close()

    import asyncio

    return asyncio.run(read())


def engines_up(src: str | None, args, dir: Path) -> EngineSet:
    """The engines of tree `src` (its own engine settings), started by that tree's code."""
    env = {**os.environ, **({"PYTHONPATH": src} if src else {})}
    code = ("import sys; from qim.dev.engines import EngineSet; "
            f"EngineSet.up(sys.argv[1], with_cassandra={bool(args.archive)})")
    subprocess.run([sys.executable, "-c", code, str(dir)], env=env, check=True)
    engines = EngineSet.load(dir)
    assert engines is not None
    return engines


def one_tree(label: str, src: str | None, engines, args, out: Path) -> dict:
    """Start a stack from `src` (None: this checkout), measure idle then load, stop it."""
    env = dict(engines.env())
    if src:
        env["PYTHONPATH"] = src
    stack = stack_up(out / f"stack-{label}", env, die_with_parent=True)
    try:
        pids = {e.name: e.pid for e in engines.engines if e.pid}
        pids.update(stack.pids)
        time.sleep(args.settle)
        a, t0 = cpu(pids), time.monotonic()
        time.sleep(args.idle)
        b, dt = cpu(pids), time.monotonic() - t0
        idle = {n: round((b[n] - a[n]) * 1000 / dt, 2) for n in pids}
        report = out / f"{label}.json"
        archived0 = metric(stack, "archiver", "qim_archiver_messages_written") if args.archive else 0.0
        argv = [sys.executable, "-m", "qim.cli.loadgen", "rate", "--rate", f"{args.rate:g}",
                "--duration", f"{args.seconds:g}", "--pairs", "20", "--drain", "30", "--json", str(report)]
        before, committed0 = cpu(pids), outbox_end(engines)
        with open(out / f"{label}.log", "w") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                    env={**os.environ, **stack.client_env()})
            _, status, usage = os.wait4(proc.pid, 0)
        if args.archive:  # the archiver lags behind the load by design: let it catch up
            deadline = time.monotonic() + 120
            while metric(stack, "archiver", "qim_archiver_outbox_lag") > 0 and time.monotonic() < deadline:
                time.sleep(1)
        after, committed = cpu(pids), outbox_end(engines) - committed0
        step = Step(args.rate, args.seconds, json.loads(report.read_text()), {}, os.waitstatus_to_exitcode(status))
        per_msg = {n: round((after[n] - before[n]) * 1000 / max(committed, 1), 3) for n in pids}
        per_msg["loadgen"] = round((usage.ru_utime + usage.ru_stime) * 1000 / max(committed, 1), 3)
        res = {"idle_ms_per_s": idle, "idle_total": round(sum(idle.values()), 1),
               "acked": step.acked, "committed": committed, "exit": os.waitstatus_to_exitcode(status),
               "ack_p99_ms": step.p99("ack"), "e2e_p99_ms": step.p99("e2e"),
               "cpu_ms_per_msg": per_msg,
               "cpu_ms_per_msg_total": round(sum(v for n, v in per_msg.items() if n != "loadgen"), 3),
               "loadavg": os.getloadavg()}
        if args.archive:
            written = metric(stack, "archiver", "qim_archiver_messages_written") - archived0
            res["archived"] = written
            res["archiver_ms_per_archived"] = round((after["archiver"] - before["archiver"]) * 1000 / max(written, 1), 3)
            res["cassandra_ms_per_archived"] = round((after["cassandra"] - before["cassandra"]) * 1000
                                                     / max(written, 1), 3)
        return res
    finally:
        stack.down()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", required=True, help="the older tree (a directory holding qim/)")
    p.add_argument("--rate", type=float, default=300.0)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--idle", type=float, default=60.0)
    p.add_argument("--settle", type=float, default=15.0)
    p.add_argument("--archive", action="store_true")
    p.add_argument("--order", default="base,branch", help="the trees, in the order they run")
    p.add_argument("--out", default="/tmp/engines-ab")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results: dict = {"config": vars(args)}
    for label in args.order.split(","):
        src = args.base if label.startswith("base") else None
        engines = engines_up(src, args, out / f"engines-{label}")
        try:
            results[label] = one_tree(label, src, engines, args, out)
        finally:
            engines.down(timeout=15)
        print(json.dumps({label: results[label]}), file=sys.stderr, flush=True)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
