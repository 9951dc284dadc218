"""The group step of `make perf` (docs/perf.md "`make perf`", group_entries_per_s): direct
sends beside one sender to a 1,000-member group, measured from the step's start until
the pipeline drained: mailbox entries appended per second, each process's CPU and
Redis's own time and calls per command (INFO commandstats) per 1,000 entries. `bench` is
qim/dev/perf.py's Bench (its stack, engines, step, sample and metrics), passed in so
this module needs nothing of perf.py."""

from __future__ import annotations

import time
from typing import Any

from qim.dev.perf_report import InstrumentError, Step, counter_of, cpu_ms_per_msg, redis_commands, stack_total


def entries(bench: Any) -> float:
    """Mailbox entries appended so far over every mailbox node (qim_mailbox_entries_total)."""
    names = [n for n in bench.stack.metrics if n.rstrip("0123456789") == "mailbox"]
    try:
        return sum(counter_of(text, "qim_mailbox_entries") for text in bench._metrics(names))
    except OSError as exc:
        raise InstrumentError(f"a mailbox node's metrics did not answer: {exc}") from exc


def group_step(bench: Any) -> tuple[Step, dict]:
    """The group step and its figures: mailbox entries appended from its start until
    the pipeline drained, per second of that time (perf_report, group_entries_per_s), and
    the E2E P99 of the step's direct messages (group_direct_e2e_p99_ms)."""
    bench.until_drained()
    pids = bench.pids()
    redis = bench.engines.redis.client()
    redis.config_resetstat()  # Redis's own time per command over the step (INFO commandstats)
    before, t0, cpu0 = entries(bench), time.monotonic(), bench.sample(pids)
    step = bench.step(bench.cfg.group_rate, bench.cfg.seconds, f"group-{bench.cfg.group_rate:g}",
                     ["--group-members", "1000", "--group-rate", f"{bench.cfg.group_sends:g}"])
    bench.until_drained()
    appended, elapsed, cpu1 = entries(bench) - before, time.monotonic() - t0, bench.sample(pids)
    stats = redis.info("commandstats")
    redis.close()
    figures: dict = {"entries": appended, "seconds": round(elapsed, 2),
                     "entries_per_s": round(appended / elapsed, 1),
                     # the direct receivers' E2E P99 beside the group (issue 41; None: no sample)
                     "direct_e2e_p99_ms": step.p99("e2e")}
    bench.console.print(f"group: {appended:.0f} mailbox entries in {elapsed:.1f} s "
                       f"({figures['entries_per_s']:g} per second, until drained)")
    if appended >= 1000:  # CPU of the whole step and drain (direct sends included), per 1,000 entries
        try:
            per = cpu_ms_per_msg(cpu0, cpu1, appended / 1000)
        except ValueError as exc:
            raise InstrumentError(f"group step: {exc}") from exc
        us = redis_commands(stats, appended / 1000)
        figures.update(cpu_ms_per_1k_entries=per, redis_us_per_1k_entries=us,
                       redis_calls_per_1k_entries=redis_commands(stats, appended / 1000, "calls"))
        bench.console.print("group: Redis µs per 1,000 entries by command "
                           + " ".join(f"{k}={v:g}" for k, v in list(us.items())[:8]))
        bench.console.print(f"group: CPU ms per 1,000 entries until drained {stack_total(per):.1f} "
                           + " ".join(f"{k}={v:g}" for k, v in sorted(per.items(), key=lambda kv: -kv[1])))
    return step, figures

