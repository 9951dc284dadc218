"""`make perf` (docs/perf-profile.md): a private stack, a ladder of rates, CPU per message from
/proc, `.perf/perf.json`, `.perf/perf.png` and one last line

    perf: max_rate=… ack_p99_ms=… e2e_p99_ms=… cpu_ms_per_msg=… low_load_e2e_p99_ms=…
          idle_cpu_ms_per_s=… cpu_ms_per_msg_loadgen=…

The stack is this command's own: engines and services in .perf/ (own ports, own data,
no Cassandra unless `--archive`, PERF_ARCHIVE=1: then Cassandra and qim-archiver too, the
archive tier of `make up`), started with `die_with_parent` and stopped by pid at the
end, also on an error, Ctrl-C or SIGTERM. Each step runs `qim-loadgen rate --json` (SDK lane on, 5 %)
for PERF_SECONDS at one rate of PERF_RATES; the CPU of every engine, service and of the
load generator (its rusage) over the step is divided by the messages ACKed. The ladder
stops climbing after the first failed step (errors, loss, ...); then the best passing
rate is held for PERF_HOLD_SECONDS (a failed hold tries the next lower passing rate).
First the connection step (qim/dev/perf_conn.py, PERF_CONNECTIONS idle authenticated TLS
connections on a lone gateway, 0 skips it; before the stack starts, so nothing else
runs): the line then ends with `conn_kb_per_idle=… logins_per_s=…`.
`--group-step` (PERF_GROUP_STEP=1) adds one step of direct sends at PERF_GROUP_RATE
while one more connection sends PERF_GROUP_SENDS a second to a 1,000-member group (its
ACK P99 against the direct sends'); the line
then ends with `group_entries_per_s=…` (mailbox entries appended per second until the
pipeline drained) and `group_direct_e2e_p99_ms=…` (the direct messages' E2E P99 of the step). `--topology scaled` (PERF_TOPOLOGY=scaled) runs two nodes of every
kind (`scaled_nodes`) on the same machine, on engines of their own (.perf/engines-scaled:
the Outbox gets two partitions), to compare CPU per message with the single topology.
`--redis N` (PERF_REDIS=N > 1) measures one Redis and N instances side by side
(qim/dev/perf_redis.py). `--brokers 3` (PERF_BROKERS=3) runs a three-broker KRaft cluster (RF 3, min ISR 2, no
flush per append: the production durability profile) instead of the one broker that
flushes every append (.perf/engines-3brokers; each broker its own row: kafka1, kafka2, kafka3;
started from threads, they outlive a SIGKILL of this command: `qim-dev engines down --dir`).
After the steps, once the pipeline drained (no Outbox lag at the fanout or the archiver,
no record queued at the mailbox), every engine's and service's CPU is sampled over
PERF_IDLE_SECONDS of no load: the idle figure, ms of CPU per second (0: skipped).
A load generator that ends without its report (the stack refused its logins, ...) makes
a failed step with its last line as the reason. Rules of the figures:
qim/dev/perf_report.py. Exit 0 whatever the stack achieved; 1 when the instrument itself
broke (the private stack did not start, a stack process vanished, CPU counters that do
not add up), with the reason; 2 for a bad option or PERF_* value (qim/dev/perf_args.py,
checked before anything starts); 130 on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from qim.dev import perf_conn, perf_redis
from qim.dev.perf_args import PerfArgError, options
from qim.dev.perf_fresh import fresh_engines
from qim.dev.perf_group import group_step
from qim.dev.perf_report import (
    LOADGEN,
    InstrumentError,
    Step,
    backlog_of,
    cpu_ms_per_msg,
    document,
    final_line,
    idle_ms_per_s,
    no_report,
    plot,
    read_cpu_s,
    stack_total,
)

DRAIN_S = 30.0


def scaled_nodes(archive: bool) -> dict[str, int]:
    """PERF_TOPOLOGY=scaled: two nodes of every kind in the service table (the archiver
    only with the archive tier), but for kinds assigned statically by node index (the
    RoomWriter: no takeover, docs/status.md), which keep one."""
    from qim.topology import processes

    return {s.name: 2 for s in processes() if not s.node_index and (archive or not s.archive_only)}
IDLE_WINDOW_S = 10.0  # the idle window is also reported in windows this long (perf.json idle_windows)
QUIET_TIMEOUT_S = 300.0  # the longest wait for the pipeline to drain before the idle window


def _progress():
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True, soft_wrap=True)  # stdout keeps only the final line
    return console, Progress(TextColumn("{task.description}"), BarColumn(), TimeRemainingColumn(),
                             console=console, transient=True)


class Bench:
    """The private stack and the steps run against it."""

    def __init__(self, cfg: argparse.Namespace) -> None:
        self.cfg, self.out = cfg, Path(cfg.out)
        self.engines: Any = None  # EngineSet and Stack once `up` ran (imported there: qim.dev needs `dev`)
        self.stack: Any = None
        self.console, self.progress = _progress()
        self.idle_windows: list[float] = []  # the idle window in IDLE_WINDOW_S parts, ms of CPU per second

    def up(self) -> None:
        """Engines and services of our own (.perf/engines, .perf/stack)."""
        from qim.dev.engines import EngineSet
        from qim.dev.stack import stack_up
        from qim.errors import EngineError

        scaled = self.cfg.topology == "scaled"
        nodes = scaled_nodes(self.cfg.archive) if scaled else None
        suffix = (("-scaled" if scaled else "") + ("-3brokers" if self.cfg.brokers == 3 else "")
                  + (f"-redis{self.cfg.redis}" if self.cfg.redis > 1 else ""))
        try:
            fresh_engines(self.out / f"engines{suffix}")  # the same starting state every run (perf_fresh.py)
            self.engines = EngineSet.up(self.out / f"engines{suffix}", die_with_parent=True,
                                        with_cassandra=self.cfg.archive, outbox_partitions=2 if scaled else None,
                                        brokers=self.cfg.brokers, redis_instances=self.cfg.redis)
            self.stack = stack_up(self.out / f"stack{suffix}", self.engines.env(), die_with_parent=True, nodes=nodes)
        except EngineError as exc:
            raise InstrumentError(f"the private stack did not start: {exc}") from exc

    def down(self) -> None:
        """Stop exactly what `up` started (by pid)."""
        if self.stack is not None:
            self.stack.down()
        if self.engines is not None:
            self.engines.down(timeout=15)

    def pids(self) -> dict[str, int]:
        """Every measured process but the load generator: engines, then services."""
        out = {e.name: e.pid for e in self.engines.engines if e.pid}  # a cluster's brokers: kafka1..3
        out.update(self.stack.pids)
        return out

    def sample(self, pids: dict[str, int]) -> dict[str, float]:
        """CPU seconds of each process now; InstrumentError when one is gone."""
        try:
            return {name: read_cpu_s(pid) for name, pid in pids.items()}
        except ProcessLookupError as exc:
            raise InstrumentError(f"{exc}: a stack process died during the run") from exc

    def step(self, rate: float, seconds: float, label: str, extra: Sequence[str] = ()) -> Step:
        """One `qim-loadgen rate` run with CPU samples around it."""
        steps_dir = self.out / "steps"
        steps_dir.mkdir(parents=True, exist_ok=True)
        report = steps_dir / f"{label}.json"
        report.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "qim.cli.loadgen", "rate", "--rate", f"{rate:g}", "--duration", f"{seconds:g}",
                "--pairs", str(self.cfg.pairs), "--drain", f"{DRAIN_S:g}", "--json", str(report), *extra,
                *(["--mix", self.cfg.mix] if self.cfg.mix else [])]
        if self.cfg.sdk_clients is not None:
            argv += ["--sdk-clients", str(self.cfg.sdk_clients)]
        pids = self.pids()
        before = self.sample(pids)
        with open(steps_dir / f"{label}.log", "w") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                    env={**os.environ, **self.stack.client_env()})
            task = self.progress.add_task(f"{label}: {rate:g} msg/s", total=seconds + DRAIN_S)
            t0 = time.monotonic()
            try:
                while True:  # wait4 for the load generator's own rusage (it is its CPU)
                    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                    if pid:
                        proc.returncode = os.waitstatus_to_exitcode(status)
                        break
                    self.progress.update(task, completed=min(time.monotonic() - t0, seconds + DRAIN_S))
                    time.sleep(0.5)
            finally:
                if proc.returncode is None:  # interrupted: the load generator goes too
                    proc.kill()
                    proc.wait()
                self.progress.remove_task(task)
        after = self.sample(pids)
        if report.exists():
            doc = json.loads(report.read_text())
        else:  # it gave up before its report (e.g. the stack refused the logins): a failed step
            tail = (steps_dir / f"{label}.log").read_text(errors="replace").strip().splitlines()[-1:]
            doc = no_report(f"exit {proc.returncode} without a report: {tail[0] if tail else '(no output)'}")
        before[LOADGEN], after[LOADGEN] = 0.0, usage.ru_utime + usage.ru_stime
        s = Step(rate, seconds, doc, {}, proc.returncode)
        if s.acked:
            try:
                s.cpu_ms = cpu_ms_per_msg(before, after, s.acked)
            except ValueError as exc:
                raise InstrumentError(f"{label}: {exc}") from exc
        t = doc["total"]
        if doc.get("error"):
            self.console.print(f"{label}: {doc['error']}")
        self.console.print(f"{label}: {rate:g} msg/s {'PASS' if s.passes else 'FAIL' if s.failed else 'slow'} "
                           f"acked={s.acked} ack_p99={t['ack']['p99_ms']} e2e_p99={t['e2e']['p99_ms']} ms "
                           f"cpu={stack_total(s.cpu_ms):.2f} ms/msg (loadgen {s.cpu_ms.get(LOADGEN, 0):.2f})")
        return s

    def _metrics(self, names) -> list[str]:
        """The Prometheus text of each instance in `names` (OSError when one does not answer)."""
        import urllib.request

        out = []
        for name in names:
            with urllib.request.urlopen(f"http://{self.stack.metrics[name]}/metrics", timeout=2.0) as r:
                out.append(r.read().decode())
        return out

    def backlog(self) -> float:
        """Work still queued in the pipeline over every instance (perf_report.backlog_of);
        a metrics endpoint that does not answer counts as work left."""
        try:
            return sum(backlog_of(text) for text in self._metrics(self.stack.metrics))
        except OSError:
            return float("inf")

    def until_drained(self) -> None:
        """Wait until no work is queued in the pipeline; InstrumentError after QUIET_TIMEOUT_S."""
        deadline = time.monotonic() + QUIET_TIMEOUT_S
        while self.backlog() > 0:
            if time.monotonic() > deadline:
                raise InstrumentError(f"the pipeline did not drain within {QUIET_TIMEOUT_S:g} s")
            time.sleep(1.0)

    def idle(self, seconds: float) -> Optional[dict[str, float]]:
        """CPU ms per second of every engine and service over `seconds` of no load, once
        the pipeline drained (None when `seconds` is 0). InstrumentError when it never
        drains within QUIET_TIMEOUT_S."""
        if seconds <= 0:
            return None
        self.until_drained()
        pids = self.pids()
        self.console.print(f"idle: {seconds:g} s without load")
        before, t0 = self.sample(pids), time.monotonic()
        last, t_last = before, t0
        while (left := seconds - (time.monotonic() - t0)) > 0:  # windows: does the idle cost decay?
            time.sleep(min(IDLE_WINDOW_S, left))
            now, t_now = self.sample(pids), time.monotonic()
            try:
                window = idle_ms_per_s(last, now, t_now - t_last)
            except ValueError as exc:
                raise InstrumentError(f"idle: {exc}") from exc
            self.idle_windows.append(round(stack_total(window), 1))
            last, t_last = now, t_now
        after, elapsed = last, t_last - t0
        self.console.print("idle: ms of CPU per second in each window of "
                           f"{IDLE_WINDOW_S:g} s: {' '.join(f'{w:g}' for w in self.idle_windows)}")
        try:
            out = idle_ms_per_s(before, after, elapsed)
        except ValueError as exc:
            raise InstrumentError(f"idle: {exc}") from exc
        self.console.print(f"idle: {stack_total(out):.1f} ms of CPU per second "
                           + " ".join(f"{k}={v:g}" for k, v in sorted(out.items(), key=lambda kv: -kv[1])))
        return out

    def run(self) -> tuple[list[Step], list[Step], Optional[tuple[Step, dict]]]:
        """The ladder, the hold, the group step (with its figures)."""
        rates = self.cfg.rates  # floats, checked by perf_args.options()
        steps: list[Step] = []
        for rate in rates:
            steps.append(self.step(rate, self.cfg.seconds, f"step-{rate:g}"))
            if steps[-1].failed:
                break
        holds: list[Step] = []
        for rate in sorted({s.rate for s in steps if s.passes}, reverse=True):
            holds.append(self.step(rate, self.cfg.hold_seconds, f"hold-{rate:g}"))
            holds[-1].hold = True
            if holds[-1].passes:
                break
        group = group_step(self) if self.cfg.group_step else None
        return steps, holds, group


def _connection_step(bench: "Bench", connections: int) -> Optional[dict]:
    if not connections:
        return None
    try:
        return perf_conn.run(connections, base=bench.out / "conn", report=bench.console.print)
    except (perf_conn.ConnStepError, RuntimeError) as exc:
        raise InstrumentError(f"connection step: {exc}") from exc


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the stack like Ctrl-C (the finally of main)


def run_one(cfg: argparse.Namespace) -> tuple[int, Optional[str], list[Step], list[Step]]:
    """One whole measurement with `cfg`: (exit code, the final line or None, the ladder's
    steps, the holds); the private stack is stopped whatever happens."""
    bench = Bench(cfg)
    steps: list[Step] = []
    holds: list[Step] = []
    try:
        with bench.progress:
            conn = _connection_step(bench, cfg.connections)
            bench.console.print(f"perf: starting a private stack in {bench.out}")
            bench.up()
            steps, holds, group = bench.run()
            idle = bench.idle(cfg.idle_seconds)
        line = (final_line(steps, holds, idle, None if group is None else group[1])
                + (f" {perf_conn.conn_line(conn)}" if conn else ""))
        bench.out.mkdir(parents=True, exist_ok=True)
        doc = document(cfg, steps, holds, group, line, idle, conn)
        doc["idle_windows"] = bench.idle_windows
        (bench.out / "perf.json").write_text(json.dumps(doc, indent=1))
        plot(steps, str(bench.out / "perf.png"))
    except InstrumentError as exc:
        print(f"perf: instrument broke: {exc}", file=sys.stderr)
        return 1, None, steps, holds
    except KeyboardInterrupt:
        print("perf: interrupted; the private stack is stopped", file=sys.stderr)
        return 130, None, steps, holds
    finally:
        bench.down()
    return 0, line, steps, holds


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run `make perf`; see the module docstring for the exit codes (2: a bad option or
    PERF_* value, `perf: <what is wrong>`, before anything starts; PERF_REDIS=N > 1: perf_redis)."""
    try:
        cfg = options(argv)
    except PerfArgError as exc:
        print(f"perf: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    if cfg.redis > 1:
        return perf_redis.compare(cfg, run_one)
    code, line, _steps, _holds = run_one(cfg)
    if line is not None:
        print(line, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
