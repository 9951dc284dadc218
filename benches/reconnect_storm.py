"""A reconnect storm, measured: how long until every device is back after its gateway
restarted (docs/perf.md "Reconnect storm"; docs/decisions/0078-login-admission.md).

    .venv/bin/python benches/reconnect_storm.py [--devices 2000] [--clients 2]
        [--policy new|old] [--admission on|off] [--json]

A lone qim-gateway (qim/dev/lone_gateway.py: TLS 1.3 client port, the development token
key, its own Redis for the node lease, session epochs and revocations; no backends, so a
device is "back" at AUTH_OK: what the gateway's login path costs, not a sync) and
`--clients` processes of idle devices (benches/reconnect_storm_client.py), each
reconnecting with the SDK's policy (`new`: now; `old`: a first retry after 25–75 ms)
and honouring the gateway's retry-after hints. All devices log in; then the gateway is
stopped (SIGTERM: every connection drops), its Redis wiped and a new gateway started
on the same port (`restart_s`: the stop until the port accepts again); the storm ends
when every device is authenticated again. `--admission off` runs the gateway with
login admission disabled (QIM_GATEWAY_LOGINS_INFLIGHT 10000, QIM_GATEWAY_LOGIN_QUEUE
1000000), as before decision 0078. Prints one line (or JSON): restart_s, all_back_s
(the stop until the last device was back), the wait of each device from its drop to
its AUTH_OK (p50/p90/p99/max), peak logins in one second, attempts per device, the
refusals with a hint and the failed attempts (refused connects, timeouts), and the
gateway's CPU during the storm. Not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qim.dev.lone_gateway import free_port, lone_gateway  # noqa: E402
from qim.dev.perf_report import read_cpu_s  # noqa: E402

TIMEOUT_S = 900.0
OFF = {"QIM_GATEWAY_LOGINS_INFLIGHT": "10000", "QIM_GATEWAY_LOGIN_QUEUE": "1000000"}


class Client:
    """One reconnect_storm_client.py process and its line protocol."""

    def __init__(self, gw: Any, source: str, first_user: int, count: int, policy: str, seed: int) -> None:
        argv = [sys.executable, str(Path(__file__).with_name("reconnect_storm_client.py")), "--addr", gw.addr,
                "--ca-file", gw.ca_file, "--key", gw.token_key, "--source", source, "--first-user",
                str(first_user), "--count", str(count), "--policy", policy, "--seed", str(seed)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, cmd: str) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"cmd": cmd}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"a device process exited ({self.proc.wait()})")
        return json.loads(line)

    def stop(self) -> None:
        try:
            self.ask("quit")
        except (OSError, RuntimeError, ValueError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3) if ordered else 0.0


def storm(devices: int, clients: int, policy: str, admission: bool, base: Path, seed: int) -> dict:
    """One storm (module docstring); the figures as a dict."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    env = {"QIM_GATEWAY_LISTEN": f"127.0.0.1:{free_port()}", "QIM_GATEWAY_HEARTBEAT_S": "600",
           "QIM_AUTH_TIMEOUT_MS": "30000", **({} if admission else OFF)}
    gw = lone_gateway(base, env)
    procs: list[Client] = []
    try:
        per = -(-devices // clients)
        procs = [Client(gw, f"127.0.0.{2 + i}", 1 + i * per, min(per, devices - i * per), policy, seed + i)
                 for i in range(clients)]
        for p in procs:
            assert p.proc.stdin is not None
            p.proc.stdin.write(json.dumps({"cmd": "open"}) + "\n")
            p.proc.stdin.flush()
        for p in procs:
            assert p.proc.stdout is not None
            json.loads(p.proc.stdout.readline())
        stopped = time.monotonic()
        gw.stop()  # SIGTERM: every device's connection drops
        shutil.rmtree(base / "redis", ignore_errors=True)  # a fresh lease store, as after a crash
        gw = lone_gateway(base, env)
        up = time.monotonic()
        cpu0 = read_cpu_s(gw.proc.pid)
        while True:
            status = [p.ask("status") for p in procs]
            if sum(s["back"] for s in status) >= devices:
                break
            if time.monotonic() - stopped > TIMEOUT_S:
                raise RuntimeError(f"not every device back within {TIMEOUT_S} s: {status}")
            time.sleep(0.2)
        cpu = read_cpu_s(gw.proc.pid) - cpu0
        reports = [p.ask("report") for p in procs]
    finally:
        for p in procs:
            p.stop()
        gw.stop()
    waits = [w for r in reports for w in r["waits"]]
    back_at = [t for r in reports for t in r["back_at"]]
    attempts = [a for r in reports for a in r["attempts"]]
    per_second: dict[int, int] = {}
    for t in back_at:
        per_second[int(t - stopped)] = per_second.get(int(t - stopped), 0) + 1
    return {"devices": devices, "policy": policy, "admission": "on" if admission else "off",
            "restart_s": round(up - stopped, 2), "all_back_s": round(max(back_at) - stopped, 2),
            "wait_p50_s": pct(waits, 0.5), "wait_p90_s": pct(waits, 0.9), "wait_p99_s": pct(waits, 0.99),
            "wait_max_s": pct(waits, 1.0), "peak_logins_per_s": max(per_second.values()),
            "attempts_mean": round(sum(attempts) / len(attempts), 2), "attempts_max": max(attempts),
            "refused_with_hint": sum(r["refused"] for r in reports),
            "failed_attempts": sum(r["failed"] for r in reports), "gateway_cpu_s": round(cpu, 2)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", type=int, default=2000)
    p.add_argument("--clients", type=int, default=2)
    p.add_argument("--policy", choices=("new", "old"), default="new")
    p.add_argument("--admission", choices=("on", "off"), default="on")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--base", type=Path, help="a directory for the gateway (default: a temporary one)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.devices < 1 or args.clients < 1:
        print("reconnect_storm: --devices and --clients must be at least 1", file=sys.stderr)
        return 2
    base = args.base or Path(tempfile.mkdtemp(prefix="qim-storm-"))
    try:
        figures = storm(args.devices, args.clients, args.policy, args.admission == "on", base, args.seed)
    except RuntimeError as exc:
        print(f"reconnect_storm: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.base is None:
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(figures) if args.json else " ".join(f"{k}={v}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
