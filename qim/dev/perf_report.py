"""The figures of `make perf` (docs/perf-profile.md), pure logic: CPU per message from /proc samples,
the pass rule of a step, max_rate, the final line, the JSON document and the plot.

Inputs are the JSON reports of `qim-loadgen rate --json` (qim/cli/loadgen_rate.py) and
samples of /proc/PID/stat taken before and after each step by qim/dev/perf.py.

Rules:
  a step passes      the load generator's verdict is clean (every send ACKed, arrival
                     >= 99 %, nothing lost, duplicated, reordered or corrupt, SDK lane
                     clean) and ACK P99 <= 50 ms and E2E P99 <= 200 ms
  a step failed      the load generator's verdict is not clean (errors, loss, ...): the
                     ladder stops climbing after it
  max_rate           the highest rate whose hold (PERF_HOLD_SECONDS, 180 s) passed; 0
                     when none did
  cpu_ms_per_msg     the engines' and services' user+system CPU over the step / messages
                     ACKed (frame lane + SDK lane), at 500 msg/s or the nearest step;
                     the load generator's own CPU is reported apart
                     (cpu_ms_per_msg_loadgen, same step)
  low_load_e2e_p99   the highest E2E P99 over the steps at <= 100 msg/s
  idle_cpu_ms_per_s  the engines' and services' CPU per second of wall time while no load
                     runs (after the ladder, once the pipeline drained): 50 is 5 % of one core
  group_entries_per_s  with the group step: the mailbox entries appended over every
                     mailbox node (qim_mailbox_entries_total) from the step's start until
                     the pipeline drained, per second of that time (direct sends of the
                     step included: a few hundred per second)
  group_direct_e2e_p99_ms  with the group step: the E2E P99 of the direct messages sent
                     beside the group (the step's own receivers; issue 41 "direct
                     messages never wait behind a group": goal <= 200 ms)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

ACK_P99_GOAL_MS = 50.0
E2E_P99_GOAL_MS = 200.0
CPU_AT_RATE = 500.0
LOW_LOAD_RATE = 100.0
LOADGEN = "loadgen"  # the load generator's entry in a step's CPU: never part of the stack's total
# gauges that are 0 once nothing is left to do (Outbox lag of the fanout and the archiver,
# records queued in the mailbox's shard FIFOs): the idle window waits for them
BACKLOG_GAUGES = ("qim_fanout_outbox_lag", "qim_mailbox_queued_records", "qim_archiver_outbox_lag")


class InstrumentError(RuntimeError):
    """The measurement itself broke (not the stack under test): `make perf` exits 1 with the reason."""


def parse_proc_stat(text: str) -> tuple[int, int]:
    """(utime, stime) in clock ticks from the text of /proc/PID/stat (all threads of the
    process). The command name may hold spaces and parentheses: fields are counted after
    the last ')'. ValueError on a malformed line."""
    head, sep, rest = text.rpartition(")")
    fields = rest.split()
    if not sep or len(fields) < 13:
        raise ValueError(f"not a /proc/PID/stat line: {text[:60]!r}")
    return int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5), counted from 1


def read_cpu_s(pid: int, proc: str = "/proc") -> float:
    """User+system CPU seconds of `pid` so far. ProcessLookupError when it is gone."""
    try:
        with open(f"{proc}/{pid}/stat", encoding="ascii", errors="replace") as f:
            utime, stime = parse_proc_stat(f.read())
    except FileNotFoundError:
        raise ProcessLookupError(f"process {pid} is gone") from None
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def cpu_ms_per_msg(before: dict[str, float], after: dict[str, float], messages: float) -> dict[str, float]:
    """{process name: CPU ms per message} over one step from two samples of CPU seconds
    ({name: s}). ValueError when a process is missing from a sample, its counter went
    backwards (another process with the pid: the instrument broke) or no message was
    ACKed."""
    if messages <= 0:
        raise ValueError("no message acknowledged: CPU per message is undefined")
    missing = sorted(set(before) ^ set(after))
    if missing:
        raise ValueError(f"processes sampled only once: {missing}")
    out = {}
    for name, t0 in before.items():
        d = after[name] - t0
        if d < 0:
            raise ValueError(f"CPU time of {name} went backwards ({t0:.2f} -> {after[name]:.2f} s)")
        out[name] = round(d * 1000.0 / messages, 4)
    return out


def idle_ms_per_s(before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, float]:
    """{process name: CPU ms per second of wall time} between two samples of CPU seconds
    taken `seconds` apart (the idle figure). ValueError as `cpu_ms_per_msg`, or when
    `seconds` is not positive."""
    if seconds <= 0:
        raise ValueError(f"an idle window of {seconds} s")
    return {name: round(ms / seconds, 2) for name, ms in cpu_ms_per_msg(before, after, 1).items()}


def redis_commands(commandstats: dict, per: float, field: str = "usec") -> dict[str, float]:
    """{command: Redis µs (field "usec") or calls ("calls") per `per` units of work} from
    redis-py's INFO commandstats ({"cmdstat_<name>": {"calls": …, "usec": …}}), largest
    first; commands called inside scripts are counted both on their own and in the
    EVALSHA that ran them."""
    out = {name.removeprefix("cmdstat_"): round(v[field] / per, 1) for name, v in commandstats.items()
           if isinstance(v, dict) and field in v} if per > 0 else {}
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def stack_total(cpu_ms: dict[str, float]) -> float:
    """The sum over engines and services of a step's (or the idle window's) CPU, the load
    generator left out."""
    return sum(v for name, v in cpu_ms.items() if name != LOADGEN)


def backlog_of(metrics_text: str) -> float:
    """The work a service still has queued, from its Prometheus text: the sum of
    BACKLOG_GAUGES (0 once the pipeline drained). ValueError on a malformed value."""
    left = 0.0
    for line in metrics_text.splitlines():
        name, _, value = line.partition(" ")
        if name in BACKLOG_GAUGES:
            left += float(value)
    return left


def counter_of(metrics_text: str, name: str) -> float:
    """The sum over labels of counter `name` (without `_total`) in Prometheus text (0
    when absent). ValueError on a malformed value."""
    total, full = 0.0, name + "_total"
    for line in metrics_text.splitlines():
        key, _, value = line.partition(" ")
        if key == full or key.startswith(full + "{"):
            total += float(value)
    return total


def no_report(error: str) -> dict:
    """The report of a step whose load generator ended without one: failed, no figures."""
    empty = {"count": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None, "max_ms": None, "mean_ms": None}
    return {"ok": False, "error": error, "total": {"sent": 0, "acked": 0, "errors": 0, "ack": empty, "e2e": empty},
            "segments": []}


@dataclass
class Step:
    """One rung of the ladder (or the hold): the load generator's report and the CPU."""

    rate: float
    seconds: float
    report: dict                     # qim-loadgen rate --json
    cpu_ms: dict                     # {process: ms per message}
    exit_code: int = 0
    hold: bool = False

    @property
    def acked(self) -> int:
        """Messages ACKed in this step: the frame lane's and the SDK lane's, plus the REACT
        and TYPING answered under PERF_MIX (operations of the step, qim/cli/loadgen_mix.py)."""
        sdk, mix = self.report.get("sdk") or {}, self.report.get("mix") or {}
        ephemeral = sum(int(mix.get(k, {}).get("acked", 0)) for k in ("reactions", "typing"))
        ephemeral += int(mix.get("typing_throttled", 0))
        return int(self.report["total"]["acked"]) + int(sdk.get("acked", 0)) + ephemeral

    def p99(self, kind: str) -> Optional[float]:
        """ACK ("ack") or end-to-end ("e2e") P99 in ms of the whole step (None: no sample)."""
        return self.report["total"][kind]["p99_ms"]

    @property
    def failed(self) -> bool:
        """The load generator's verdict is not clean (errors, loss, arrival, SDK lane)."""
        return self.exit_code != 0 or not self.report.get("ok", False)

    @property
    def passes(self) -> bool:
        """Clean, and within the ACK and end-to-end P99 goals."""
        ack, e2e = self.p99("ack"), self.p99("e2e")
        return (not self.failed and ack is not None and e2e is not None
                and ack <= ACK_P99_GOAL_MS and e2e <= E2E_P99_GOAL_MS)

    def segments(self) -> list[dict]:
        """The 5 s segments: t_s, ACK and E2E P99 (the cold-start view of the first step)."""
        return [{"t_s": s["t_s"], "sent": s["sent"], "ack_p99_ms": s["ack"]["p99_ms"],
                 "e2e_p99_ms": s["e2e"]["p99_ms"]} for s in self.report.get("segments", [])]

    def to_dict(self) -> dict:
        """The step as perf.json keeps it."""
        t = self.report["total"]
        return {"rate": self.rate, "seconds": self.seconds, "hold": self.hold, "failed": self.failed,
                "error": self.report.get("error"),
                "passes": self.passes, "acked": self.acked, "sent": t["sent"], "errors": t["errors"],
                "arrival": self.report.get("arrival"), "verdict": self.report.get("verdict"),
                "ack": t["ack"], "e2e": t["e2e"], "cpu_ms_per_msg": self.cpu_ms,
                "cpu_ms_per_msg_total": round(stack_total(self.cpu_ms), 4),
                "cpu_ms_per_msg_loadgen": self.cpu_ms.get(LOADGEN), "sdk": self.report.get("sdk"),
                "group": self.report.get("group"), "segments": self.segments()}


def max_rate(holds: list[Step]) -> float:
    """The highest rate whose hold passed (0.0 when none did)."""
    return max((h.rate for h in holds if h.passes), default=0.0)


def _nearest(steps: list[Step], rate: float) -> Optional[Step]:
    usable = [s for s in steps if s.cpu_ms]
    return min(usable, key=lambda s: (abs(s.rate - rate), s.rate)) if usable else None


def cpu_at(steps: list[Step], rate: float = CPU_AT_RATE) -> Optional[float]:
    """CPU ms per message of the engines and services (the load generator left out) at
    the ladder step nearest to `rate` (the lower on a tie; None without a step that
    ACKed anything)."""
    best = _nearest(steps, rate)
    return None if best is None else round(stack_total(best.cpu_ms), 3)


def loadgen_cpu_at(steps: list[Step], rate: float = CPU_AT_RATE) -> Optional[float]:
    """The load generator's CPU ms per message at the same step as `cpu_at` (None
    without one, or when the step has no load generator figure)."""
    best = _nearest(steps, rate)
    return None if best is None or LOADGEN not in best.cpu_ms else round(best.cpu_ms[LOADGEN], 3)


def low_load_e2e_p99(steps: list[Step], limit: float = LOW_LOAD_RATE) -> Optional[float]:
    """The highest E2E P99 over the steps at rates <= `limit` (None without one)."""
    vals = [s.p99("e2e") for s in steps if s.rate <= limit and s.p99("e2e") is not None]
    return max(vals) if vals else None  # type: ignore[type-var]


def _fmt(x: Optional[float]) -> str:
    return "nan" if x is None else f"{x:.1f}" if abs(x) >= 1 else f"{x:.2f}"


def final_line(steps: list[Step], holds: list[Step], idle: Optional[dict[str, float]] = None,
               group: Optional[dict] = None) -> str:
    """`perf: max_rate=… ack_p99_ms=… e2e_p99_ms=… cpu_ms_per_msg=… low_load_e2e_p99_ms=…
    idle_cpu_ms_per_s=… cpu_ms_per_msg_loadgen=…`, then ` group_entries_per_s=…
    group_direct_e2e_p99_ms=…` when the group step ran (`group`: its figures, nan for a
    figure not measured). ACK/E2E P99 are the passing hold's at
    max_rate; without one, the last hold's; without a hold, the first step's. `idle`:
    ms/s per process of the idle window (None: not measured, nan)."""
    best = max_rate(holds)
    shown = next((h for h in holds if h.passes and h.rate == best), holds[-1] if holds else
                 (steps[0] if steps else None))
    ack = shown.p99("ack") if shown else None
    e2e = shown.p99("e2e") if shown else None
    return (f"perf: max_rate={best:g} ack_p99_ms={_fmt(ack)} e2e_p99_ms={_fmt(e2e)} "
            f"cpu_ms_per_msg={_fmt(cpu_at(steps))} low_load_e2e_p99_ms={_fmt(low_load_e2e_p99(steps))} "
            f"idle_cpu_ms_per_s={_fmt(None if idle is None else stack_total(idle))} "
            f"cpu_ms_per_msg_loadgen={_fmt(loadgen_cpu_at(steps))}"
            + ("" if group is None else f" group_entries_per_s={_fmt(group.get('entries_per_s'))}"
               f" group_direct_e2e_p99_ms={_fmt(group.get('direct_e2e_p99_ms'))}"))


def document(cfg, steps: list[Step], holds: list[Step], group: Optional[tuple[Step, dict]], line: str,
             idle: Optional[dict[str, float]], conn: Optional[dict] = None) -> dict:
    """The JSON document of a run (.perf/perf.json): the line, the configuration, the
    machine's load, every step and hold, the cold start (and its detail), the idle,
    connection and group figures."""
    return {"line": line, "config": {k: v for k, v in vars(cfg).items()}, "loadavg": os.getloadavg(),
            "idle_cpu_ms_per_s": idle,
            "connection_step": conn,
            "cpus": os.cpu_count(), "max_rate": max_rate(holds),
            "steps": [s.to_dict() for s in steps], "holds": [h.to_dict() for h in holds],
            "cold_start": steps[0].segments() if steps else [],
            # how long the load generator waited for its logins to settle, and the first
            # segment per second of send time with its slowest samples (qim/cli/loadgen_rate.py)
            "cold_start_detail": {k: steps[0].report.get(k) for k in ("settle", "first_seconds")} if steps else None,
            "group_step": None if group is None else {**(group[0].report.get("group") or {}), **group[1],
                                                     "step": group[0].to_dict()}}


def plot(steps: list[Step], path: str) -> None:
    """The PNG of a run: ACK and E2E P50/P99 against rate (log scale, goals dashed) and
    CPU ms per message by process, stacked, per step. matplotlib (the `perf` extra)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    fig, (lat, cpu) = plt.subplots(1, 2, figsize=(13, 5))
    rates = [s.rate for s in steps]
    for kind, color in (("ack", "tab:blue"), ("e2e", "tab:orange")):
        for q, style in (("p50_ms", ":"), ("p99_ms", "-")):
            ys = [s.report["total"][kind][q] for s in steps]
            lat.plot(rates, [float("nan") if y is None else y for y in ys], style, marker="o", color=color,
                     label=f"{kind.upper()} {q[:3].upper()}")
    lat.axhline(ACK_P99_GOAL_MS, color="tab:blue", linestyle="--", linewidth=0.8)
    lat.axhline(E2E_P99_GOAL_MS, color="tab:orange", linestyle="--", linewidth=0.8)
    lat.set(xlabel="offered rate (msg/s)", ylabel="latency (ms)", yscale="log", title="latency by rate")
    lat.legend()
    names = sorted({n for s in steps for n in s.cpu_ms})
    bottom = [0.0] * len(steps)
    x = list(range(len(steps)))
    for name in names:
        ys = [s.cpu_ms.get(name, 0.0) for s in steps]
        cpu.bar(x, ys, bottom=bottom, label=name)
        bottom = [b + y for b, y in zip(bottom, ys)]
    cpu.set_xticks(x, [f"{r:g}" for r in rates])
    cpu.set(xlabel="offered rate (msg/s)", ylabel="CPU ms per message", title="CPU per message by process")
    cpu.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
