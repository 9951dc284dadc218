"""`make perf PERF_REDIS=N` (qim/dev/perf_redis.py): one measurement with one Redis and
one with N instances, each in a directory of its own, the connection step once, the two
lines and one line side by side; a run that breaks stops the comparison with its code.
The measurements are stand-ins (the whole stack is `make perf`'s own business)."""

from __future__ import annotations

from qim.dev import perf_args, perf_redis
from qim.dev.perf_report import Step


def _step(rate: float, cpu: dict[str, float]) -> Step:
    t = {"sent": 10, "acked": 10, "errors": 0, "ack": {"p99_ms": 5.0}, "e2e": {"p99_ms": 9.0}}
    return Step(rate, 1.0, {"ok": True, "total": t}, dict(cpu), 0)


def test_one_and_n_instances_side_by_side(tmp_path, capsys):
    cfg = perf_args.options(["--redis", "3", "--out", str(tmp_path), "--connections", "1000"], {})
    seen = []

    def run_one(one):
        seen.append((one.redis, one.out, one.connections))
        n = one.redis
        steps = [_step(500, {"redis": 0.3 / n, **{f"redis{i}": 0.3 / n for i in range(2, n + 1)}, "writer": 1.0})]
        holds = [_step(250 * n, {}), _step(300 * n, {})]
        holds[1].report["ok"] = False  # a failed hold is not the max rate
        return 0, f"perf: max_rate={250 * n} ack_p99_ms=5.0", steps, holds

    assert perf_redis.compare(cfg, run_one) == 0
    assert seen == [(1, str(tmp_path / "redis1"), 1000), (3, str(tmp_path / "redis3"), 0)]
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["perf[redis=1]: max_rate=250 ack_p99_ms=5.0", "perf[redis=3]: max_rate=750 ack_p99_ms=5.0"]
    assert out[2] == ("perf-redis: redis=1 max_rate=250 cpu_ms_per_msg=1.3 redis_cpu_ms_per_msg=0.30 | "
                      "redis=3 max_rate=750 cpu_ms_per_msg=1.3 redis_cpu_ms_per_msg=0.30")


def test_a_broken_run_stops_the_comparison_with_its_code(tmp_path, capsys):
    cfg = perf_args.options(["--redis", "2", "--out", str(tmp_path)], {})
    runs = []

    def run_one(one):
        runs.append(one.redis)
        return 1, None, [], []

    assert perf_redis.compare(cfg, run_one) == 1
    assert runs == [1] and capsys.readouterr().out == ""
