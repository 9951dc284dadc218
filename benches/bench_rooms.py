"""Chatroom broadcast on a stack with two gateways (docs/perf.md "Rooms"): private
engines and stack, then `qim-loadgen room` with N members spread over both gateways;
the CPU seconds of qim-room and of each gateway during the posting phase (from
/proc/PID/stat, between the loadgen's "joined" line and its end) next to the loadgen's
own figures. Run: `.venv/bin/python benches/bench_rooms.py --members 2000 --rate 10
--duration 20`. On a shared host the figures are upper bounds (say so with them).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qim.dev.stack import stack_up  # noqa: E402
from tests.fixtures import start_test_engines  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """utime + stime of `pid` in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def main() -> int:
    """Start engines and a two-gateway stack, run the room step, print the figures."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--members", type=int, default=2000)
    p.add_argument("--rate", type=float, default=10.0)
    p.add_argument("--duration", type=float, default=20.0)
    p.add_argument("--posters", type=int, default=2)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="qim-bench-rooms-") as tmp:
        engines = start_test_engines(Path(tmp) / "engines", with_cassandra=False)
        try:
            stack = stack_up(Path(tmp) / "stack", engines.env(), die_with_parent=True, nodes={"gateway": 2})
            try:
                names = ["room", "gateway", "gateway2"]
                gateways = ",".join(stack.instance_env[n]["QIM_GATEWAY_LISTEN"] for n in names[1:])
                cmd = [sys.executable, "-m", "qim.cli.loadgen", "room", "--gateway", gateways, "--token-key",
                       stack.token_key, "--members", str(args.members), "--posters", str(args.posters),
                       "--rate", str(args.rate), "--duration", str(args.duration), "--ca-file", str(stack.ca_file)]
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
                assert proc.stdout is not None
                before: dict[str, float] = {}
                last = ""
                for line in proc.stdout:
                    print(line, end="", flush=True)
                    if line.startswith("loadgen_room: joined"):
                        before = {n: cpu_s(stack.pids[n]) for n in names}
                    last = line
                after = {n: cpu_s(stack.pids[n]) for n in names}
                rc = proc.wait()
                used = {n: round(after[n] - before.get(n, after[n]), 2) for n in names}
                print("bench_rooms: cpu_s during posting " + " ".join(f"{n}={v}" for n, v in used.items())
                      + f" loadgen_exit={rc}")
                return rc if last.startswith("loadgen_room: members=") else 1
            finally:
                stack.down()
        finally:
            engines.down()


if __name__ == "__main__":
    sys.exit(main())
