"""The figures of `make perf` (qim/dev/perf_report.py): pure logic on crafted reports and
fake /proc samples."""

from __future__ import annotations

import os

import pytest

from qim.dev.perf_report import (
    Step,
    backlog_of,
    counter_of,
    cpu_at,
    cpu_ms_per_msg,
    final_line,
    idle_ms_per_s,
    loadgen_cpu_at,
    low_load_e2e_p99,
    max_rate,
    parse_proc_stat,
    read_cpu_s,
    redis_commands,
)

STAT = ("4242 (qim gateway (py)) S 1 4242 4242 0 -1 4194560 1200 0 0 0 "
        "345 67 0 0 20 0 9 0 123456 1000000 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0")


def _report(ack_p99, e2e_p99, ok=True, acked=1000, sdk_acked=0, segments=()) -> dict:
    return {"ok": ok, "arrival": 1.0, "verdict": {}, "sdk": {"acked": sdk_acked},
            "total": {"sent": acked, "acked": acked, "errors": 0,
                      "ack": {"p50_ms": 1.0, "p99_ms": ack_p99}, "e2e": {"p50_ms": 2.0, "p99_ms": e2e_p99}},
            "segments": list(segments)}


def _step(rate, ack, e2e, ok=True, cpu=None, code=0, **kw) -> Step:
    return Step(rate, 60, _report(ack, e2e, ok, **kw), cpu or {"redis": 0.5, "writer": 1.0}, exit_code=code)


def test_proc_stat_fields_after_a_name_with_spaces_and_parentheses(tmp_path) -> None:
    assert parse_proc_stat(STAT) == (345, 67)
    with pytest.raises(ValueError):
        parse_proc_stat("4242 (x) S 1 2")
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "stat").write_text(STAT)
    assert read_cpu_s(4242, str(tmp_path)) == pytest.approx(412 / os.sysconf("SC_CLK_TCK"))
    with pytest.raises(ProcessLookupError):
        read_cpu_s(4243, str(tmp_path))


def test_cpu_attribution_per_process_and_per_message() -> None:
    before = {"kafka": 10.0, "mailbox": 5.0, "loadgen": 0.0}
    after = {"kafka": 12.1, "mailbox": 6.5, "loadgen": 0.9}
    assert cpu_ms_per_msg(before, after, 1000) == {"kafka": 2.1, "mailbox": 1.5, "loadgen": 0.9}
    with pytest.raises(ValueError, match="only once"):
        cpu_ms_per_msg(before, {"kafka": 12.0, "mailbox": 6.0}, 1000)
    with pytest.raises(ValueError, match="backwards"):
        cpu_ms_per_msg(before, {**after, "kafka": 1.0}, 1000)  # a new process with the pid
    with pytest.raises(ValueError, match="no message"):
        cpu_ms_per_msg(before, after, 0)


def test_pass_rule_needs_a_clean_verdict_and_both_p99_goals() -> None:
    assert _step(100, 50.0, 200.0).passes
    assert not _step(100, 50.1, 20.0).passes and not _step(100, 5.0, 200.1).passes
    dirty = _step(100, 5.0, 20.0, ok=False)
    assert dirty.failed and not dirty.passes
    assert _step(100, 5.0, 20.0, code=1).failed
    assert not _step(100, None, None).passes  # no sample is no pass


def test_max_rate_is_the_highest_passing_hold() -> None:
    holds = [_step(1000, 80.0, 150.0), _step(750, 30.0, 150.0)]
    assert max_rate(holds) == 750
    assert max_rate([_step(500, 5.0, 20.0, ok=False)]) == 0.0 and max_rate([]) == 0.0


def test_cpu_is_taken_at_500_or_the_nearest_step() -> None:
    steps = [_step(250, 1, 1, cpu={"a": 3.0}), _step(750, 1, 1, cpu={"a": 2.0, "b": 0.5})]
    assert cpu_at(steps) == 3.0  # 250 and 750 are as near: the lower
    assert cpu_at(steps + [_step(500, 1, 1, cpu={"a": 1.0, "b": 0.25})]) == 1.25
    assert cpu_at([]) is None


def test_the_load_generator_is_reported_apart_from_the_stack() -> None:
    steps = [_step(100, 1, 1, cpu={"kafka": 2.0, "loadgen": 1.5}),
             _step(500, 1, 1, cpu={"kafka": 0.75, "writer": 0.5, "loadgen": 0.6})]
    assert cpu_at(steps) == 1.25 and loadgen_cpu_at(steps) == 0.6
    assert steps[1].to_dict()["cpu_ms_per_msg_total"] == 1.25
    assert steps[1].to_dict()["cpu_ms_per_msg_loadgen"] == 0.6
    assert loadgen_cpu_at([_step(500, 1, 1, cpu={"kafka": 1.0})]) is None and loadgen_cpu_at([]) is None


def test_idle_cpu_is_ms_per_second_of_the_window() -> None:
    before = {"kafka": 10.0, "writer": 2.0}
    after = {"kafka": 10.6, "writer": 2.3}
    assert idle_ms_per_s(before, after, 60.0) == {"kafka": 10.0, "writer": 5.0}
    with pytest.raises(ValueError, match="idle window"):
        idle_ms_per_s(before, after, 0.0)
    with pytest.raises(ValueError, match="backwards"):
        idle_ms_per_s(before, {**after, "kafka": 9.0}, 60.0)


def test_backlog_is_the_queued_work_the_services_report() -> None:
    text = ("# HELP qim_fanout_outbox_lag Outbox records not yet fanned out\n# TYPE qim_fanout_outbox_lag gauge\n"
            "qim_fanout_outbox_lag 3.0\nqim_fanout_outbox_position 912.0\n")
    assert backlog_of(text) == 3.0
    assert backlog_of("qim_mailbox_queued_records 0.0\nqim_mailbox_records_total{status=\"FRESH\"} 9.0\n") == 0.0
    assert backlog_of("qim_mailbox_queued_records 2.0\nqim_archiver_outbox_lag 5.0\n") == 7.0
    assert backlog_of("") == 0.0


def test_low_load_is_the_worst_e2e_p99_up_to_100() -> None:
    steps = [_step(25, 3, 18.0), _step(100, 3, 26.5), _step(250, 3, 90.0)]
    assert low_load_e2e_p99(steps) == 26.5
    assert low_load_e2e_p99([_step(250, 3, 9.0)]) is None


def test_the_final_line() -> None:
    steps = [_step(25, 3.0, 18.0), _step(500, 12.0, 40.0, cpu={"kafka": 1.0, "writer": 0.8})]
    holds = [_step(500, 14.25, 41.0)]
    assert final_line(steps, holds) == ("perf: max_rate=500 ack_p99_ms=14.2 e2e_p99_ms=41.0 cpu_ms_per_msg=1.8 "
                                        "low_load_e2e_p99_ms=18.0 idle_cpu_ms_per_s=nan cpu_ms_per_msg_loadgen=nan")
    failed_hold = [_step(500, 70.0, 41.0)]
    assert final_line(steps, failed_hold).startswith("perf: max_rate=0 ack_p99_ms=70.0 ")
    assert final_line([], []) == ("perf: max_rate=0 ack_p99_ms=nan e2e_p99_ms=nan cpu_ms_per_msg=nan "
                                  "low_load_e2e_p99_ms=nan idle_cpu_ms_per_s=nan cpu_ms_per_msg_loadgen=nan")
    with_loadgen = [_step(500, 12.0, 40.0, cpu={"kafka": 1.0, "writer": 0.8, "loadgen": 0.5})]
    assert final_line(with_loadgen, holds, {"kafka": 20.0, "writer": 5.5}).endswith(
        "cpu_ms_per_msg=1.8 low_load_e2e_p99_ms=nan idle_cpu_ms_per_s=25.5 cpu_ms_per_msg_loadgen=0.50")
    assert final_line(steps, holds, group={"entries_per_s": 51234.4, "direct_e2e_p99_ms": 4983.2}).endswith(
        "cpu_ms_per_msg_loadgen=nan group_entries_per_s=51234.4 group_direct_e2e_p99_ms=4983.2")
    assert final_line(steps, holds, group={}).endswith(  # ran, not measured
        " group_entries_per_s=nan group_direct_e2e_p99_ms=nan")


def test_a_counter_is_summed_over_its_labels() -> None:
    text = ("# HELP qim_mailbox_entries_total x\nqim_mailbox_entries_total 7.0\n"
            "qim_mailbox_entries_created 1.7e9\nqim_mailbox_records_total{status=\"FRESH\"} 3.0\n"
            "qim_mailbox_records_total{status=\"DUPLICATE\"} 2.0\n")
    assert counter_of(text, "qim_mailbox_entries") == 7.0
    assert counter_of(text, "qim_mailbox_records") == 5.0
    assert counter_of(text, "qim_mailbox_push_batches") == 0.0
    with pytest.raises(ValueError):
        counter_of("qim_mailbox_entries_total x\n", "qim_mailbox_entries")


def test_acked_counts_both_lanes_and_segments_give_the_cold_start() -> None:
    seg = {"t_s": 5.0, "sent": 125, "ack": {"p99_ms": 9.0}, "e2e": {"p99_ms": 600.0}}
    s = _step(25, 3, 18, sdk_acked=50, segments=[seg])
    assert s.acked == 1050
    assert s.segments() == [{"t_s": 5.0, "sent": 125, "ack_p99_ms": 9.0, "e2e_p99_ms": 600.0}]
    assert s.to_dict()["cpu_ms_per_msg_total"] == 1.5


def test_a_step_without_a_report_is_failed_with_its_reason() -> None:
    from qim.dev.perf_report import no_report

    s = Step(250, 60, no_report("exit 1 without a report: HandshakeFailed"), {}, exit_code=1)
    assert s.failed and not s.passes and s.acked == 0 and s.p99("ack") is None
    assert s.to_dict()["error"].endswith("HandshakeFailed")
    assert final_line([s], []).startswith("perf: max_rate=0 ack_p99_ms=nan")


def test_redis_commands_are_per_unit_of_work_largest_first():
    stats = {"cmdstat_zadd": {"calls": 10, "usec": 500, "usec_per_call": 50.0},
             "cmdstat_evalsha": {"calls": 1, "usec": 900, "usec_per_call": 900.0},
             "cmdstat_ping": {"calls": 4, "usec": 2, "usec_per_call": 0.5}}
    assert list(redis_commands(stats, 2).items()) == [("evalsha", 450.0), ("zadd", 250.0), ("ping", 1.0)]
    assert redis_commands(stats, 0) == {}
    assert redis_commands(stats, 2, "calls") == {"zadd": 5.0, "ping": 2.0, "evalsha": 0.5}
