"""`make fuzz`: every in-process target under atheris with a random seed, then the live
gateway target against a private stack; one summary line at the end.

    python -m tests.fuzz.run

Environment: FUZZ_RUNS (inputs per in-process target, default 250000: 10^6 in all) or
FUZZ_SECONDS (time per in-process target instead), FUZZ_SEED (default: random, printed
so that a run can be repeated), FUZZ_LIVE (live sequences, default 5000; 0 skips the
live target), FUZZ_WORK (corpus growth and findings, default build/fuzz). Exit 1 when
anything was found. The last line printed is
`fuzz: inputs=N findings=K seed=S seconds=T frames=… zstd=… requests=… backends=… live=…`.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.fuzz.engine import TARGETS

ROOT = Path(__file__).resolve().parents[2]
EXECUTED = re.compile(r"stat::number_of_executed_units:\s*(\d+)")


def in_process(target: str, seed: int, work: Path) -> tuple[int, int]:
    """(inputs, findings) of one atheris run; its output goes to work/logs/<target>.log."""
    budget = (["--seconds", os.environ["FUZZ_SECONDS"]] if os.environ.get("FUZZ_SECONDS")
              else ["--runs", os.environ.get("FUZZ_RUNS", "250000")])
    log = work / "logs" / f"{target}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    before = set((work / "artifacts").glob(f"{target}-*"))
    with open(log, "w") as fh:
        code = subprocess.call([sys.executable, "-m", "tests.fuzz.engine", target, "--seed", str(seed), "--work",
                                str(work), *budget], cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT,
                               env=dict(os.environ, PYTHONPATH=str(ROOT)))
    text = log.read_text(errors="replace")
    executed = EXECUTED.findall(text)
    found = sorted(set((work / "artifacts").glob(f"{target}-*")) - before)
    findings = len(found) or int(code != 0)
    for path in found:
        print(f"fuzz: {target} finding: {path} (reproduce: python -m tests.fuzz.engine {target} {path}; log {log})")
    if code != 0 and not found:
        print(f"fuzz: {target} exited {code} without a reproducer; see {log}")
    return int(executed[-1]) if executed else 0, findings


def live(seed: int, work: Path) -> tuple[int, int]:
    """(sequences, findings) of the live target (pytest on a private stack)."""
    count = int(os.environ.get("FUZZ_LIVE", "5000"))
    if count <= 0:
        return 0, 0
    report = work / "live.json"
    report.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT), QIM_FUZZ_LIVE_SEQUENCES=str(count), QIM_FUZZ_SEED=str(seed),
               QIM_FUZZ_REPORT=str(report), QIM_FUZZ_LIVE_WS_SEQUENCES=str(max(1, count // 5)))
    log = work / "logs" / "live.log"
    with open(log, "w") as fh:
        code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                "tests/fuzz/test_live_gateway.py", "tests/fuzz/test_live_websocket.py"],
                               cwd=ROOT, env=env, stdout=fh,
                               stderr=subprocess.STDOUT)
    if code != 0:
        print(f"fuzz: live finding (seed {seed}); see {log}")
        return count, 1
    ws_report = Path(f"{report}.ws")  # the WebSocket half (tests/fuzz/test_live_websocket.py)
    return json.loads(report.read_text())["inputs"] + json.loads(ws_report.read_text())["inputs"], 0


def main() -> None:
    """Run every target; print the per-target and summary lines; exit 1 on a finding."""
    seed = int(os.environ.get("FUZZ_SEED") or random.SystemRandom().randrange(1, 1 << 31))
    work = Path(os.environ.get("FUZZ_WORK", "build/fuzz")).resolve()
    started = time.monotonic()
    parts: dict[str, int] = {}
    total = findings = 0
    for target in TARGETS:
        t0 = time.monotonic()
        n, f = in_process(target, seed, work)
        print(f"fuzz-target: target={target} inputs={n} findings={f} seed={seed} "
              f"seconds={time.monotonic() - t0:.0f}", flush=True)
        parts[target], total, findings = n, total + n, findings + f
    t0 = time.monotonic()
    n, f = live(seed, work)
    print(f"fuzz-target: target=live inputs={n} findings={f} seed={seed} seconds={time.monotonic() - t0:.0f}",
          flush=True)
    parts["live"], total, findings = n, total + n, findings + f
    detail = " ".join(f"{k}={v}" for k, v in parts.items())
    print(f"fuzz: inputs={total} findings={findings} seed={seed} seconds={time.monotonic() - started:.0f} {detail}",
          flush=True)
    sys.exit(1 if findings else 0)


if __name__ == "__main__":
    main()
