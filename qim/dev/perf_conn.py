"""The connection step of `make perf` (PERF_CONNECTIONS=N; `make perf-conn` runs it alone):
what an idle authenticated TLS connection costs a gateway, and how fast it logs devices in.

A lone gateway of its own (qim/dev/lone_gateway.py: TLS on the client port, the
development token key, no backends: a login needs none) and PERF_CONN_CLIENTS lean
client processes (qim/dev/perf_conn_client.py), each on its own loopback source address
127.0.0.2, 127.0.0.3, ... (about 28,000 ephemeral ports each toward one port). Steps:

1. warm-up: WARMUP connections (the allocator, imports and caches of a first login);
   then the gateway's RSS (VmRSS of /proc/PID/status) is the baseline;
2. logins: the other N - WARMUP connections at once from every client, each a TCP
   connect, a TLS 1.3 handshake and an AUTH answered AUTH_OK: `logins_per_s` is their
   number over the wall time, `gateway_cpu_us_per_login` the gateway's CPU (user+system,
   /proc/PID/stat) over the same time per login, `client_cpu_s` what the clients spent;
3. idle: SETTLE_S later, `conn_kb_per_idle` = (RSS - baseline) / (N - WARMUP), in KiB;
4. activity: one PING on every connection (each must answer PONG: the connections are
   alive and authenticated), then again SETTLE_S and the RSS: `conn_kb_after_ping` (the
   buffers a connection used are released again when it is idle).

The gateway runs on one core; on a machine of 2 the clients take the other, so
`logins_per_s` is bounded by the machine, and `1e6 / gateway_cpu_us_per_login` is what
one core of the gateway does. File descriptors: the gateway needs one per connection,
a client one per connection it holds: RLIMIT_NOFILE is raised to its hard limit here
(inherited by both) and N must fit it (docs/operations.md "Many connections").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional, Sequence

from qim.dev.lone_gateway import LoneGateway, lone_gateway, proc_status_kib
from qim.dev.perf_report import read_cpu_s

WARMUP = 500
SETTLE_S = 3.0
FD_MARGIN = 200  # listeners, logs, the event loop's own descriptors
PORTS_PER_SOURCE = 25_000  # of the ~28,000 ephemeral ports of one loopback source address


class ConnStepError(RuntimeError):
    """The step cannot run as asked (file-descriptor limit, a client that died): the reason."""


def raise_fd_limit(needed: int) -> int:
    """RLIMIT_NOFILE of this process raised to its hard limit (children inherit it); the
    new soft limit. ConnStepError when `needed` descriptors do not fit the hard limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    if soft != resource.RLIM_INFINITY and needed > soft:
        raise ConnStepError(f"{needed} file descriptors needed but the hard limit is {soft}: raise it "
                            f"(`ulimit -Hn`, LimitNOFILE=, docs/operations.md \"Many connections\")")
    return soft


class ClientProc:
    """One qim/dev/perf_conn_client.py process and its line protocol."""

    def __init__(self, gateway: LoneGateway, source: str, first_user: int, concurrency: int) -> None:
        argv = [sys.executable, "-m", "qim.dev.perf_conn_client", "--addr", gateway.addr, "--ca-file",
                gateway.ca_file, "--key", gateway.token_key, "--source", source, "--first-user", str(first_user),
                "--concurrency", str(concurrency)]
        self.source = source
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.read()  # {"ready": true}

    def send(self, **cmd: Any) -> None:
        """One command line."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def read(self) -> dict:
        """The next reply; ConnStepError when the client died."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise ConnStepError(f"the client on {self.source} exited ({self.proc.wait()})")
        return json.loads(line)

    def stop(self) -> None:
        """Quit (its connections close), killed after 10 s."""
        try:
            self.send(cmd="quit")
            self.proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def _all(clients: Sequence[ClientProc], cmd: str, counts: Optional[Sequence[int]] = None) -> list[dict]:
    for i, c in enumerate(clients):
        c.send(cmd=cmd, **({} if counts is None else {"count": counts[i]}))
    return [c.read() for c in clients]


def listen_overflows() -> int:
    """TcpExt ListenOverflows of the host so far (/proc/net/netstat): SYNs dropped because
    an accept queue was full (each costs the client a 1 s retransmission)."""
    with open("/proc/net/netstat", encoding="ascii") as f:
        lines = f.read().splitlines()
    for names, values in zip(lines[::2], lines[1::2]):
        if names.startswith("TcpExt:"):
            return int(dict(zip(names.split()[1:], values.split()[1:])).get("ListenOverflows", 0))
    return 0


def _profile(pid: int, out: Optional[str]) -> Optional[subprocess.Popen]:
    if not out:
        return None
    return subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "-p", str(pid), "-o", out, "--format", "raw", "-r", "200"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def run(connections: int, clients: int = 2, concurrency: int = 64, base: Optional[Path] = None,
        report=print, profile: Optional[str] = None, gateway_source: Optional[str] = None) -> dict:
    """The step (module doc); its figures as a dict. ConnStepError when it cannot run.
    `gateway_source`: a directory holding another tree's `qim/` package (an older commit's,
    `git archive`) that the gateway runs instead of this one, for a before/after in one run."""
    if connections <= WARMUP:
        raise ConnStepError(f"PERF_CONNECTIONS must be more than the {WARMUP} warm-up connections")
    per_client = -(-connections // clients)
    raise_fd_limit(max(connections, per_client) + FD_MARGIN)
    sources = max(clients, -(-connections // PORTS_PER_SOURCE))
    if sources > clients:
        raise ConnStepError(f"{connections} connections need {sources} source addresses: PERF_CONN_CLIENTS={sources}")
    made = base is None  # a directory of our own: removed at the end
    base = base or Path(tempfile.mkdtemp(prefix="qim-perf-conn-"))
    # its clients idle through the whole login phase (minutes under load) before they PING:
    # a heartbeat past it, or the gateway would close them as silent (decision 0077)
    gateway = lone_gateway(base, {"QIM_GATEWAY_HEARTBEAT_S": "600",
                                  **({"PYTHONPATH": gateway_source} if gateway_source else {})})
    procs: list[ClientProc] = []
    try:
        step = max(per_client, 1) * 10
        procs = [ClientProc(gateway, f"127.0.0.{2 + i}", 1 + i * step, concurrency) for i in range(clients)]
        pid = gateway.proc.pid
        procs[0].send(cmd="prepare", count=WARMUP)
        procs[0].read()
        procs[0].send(cmd="open")
        warm = procs[0].read()
        if warm["failed"]:
            raise ConnStepError(f"warm-up logins failed: {warm['errors']}")
        time.sleep(SETTLE_S)
        rss0 = proc_status_kib(pid, "VmRSS")
        main = connections - WARMUP
        _all(procs, "prepare", _split(main, clients))
        spy = _profile(pid, profile)
        drops0, cpu0, t0 = listen_overflows(), read_cpu_s(pid), time.monotonic()
        opened = _all(procs, "open")
        wall, cpu, drops = time.monotonic() - t0, read_cpu_s(pid) - cpu0, listen_overflows() - drops0
        if spy is not None:
            spy.send_signal(2)
            spy.wait(30)
        ok = sum(o["opened"] for o in opened)
        errors: dict[str, int] = {}
        for o in opened:
            for k, v in o["errors"].items():
                errors[k] = errors.get(k, 0) + v
        time.sleep(SETTLE_S)
        rss1 = proc_status_kib(pid, "VmRSS")
        pings = _all(procs, "ping")
        time.sleep(SETTLE_S)
        rss2 = proc_status_kib(pid, "VmRSS")
        held = WARMUP + ok
        figures = {
            "connections": held, "failed": sum(errors.values()), "errors": errors,
            "rss_baseline_mib": round(rss0 / 1024, 1), "rss_idle_mib": round(rss1 / 1024, 1),
            "rss_after_ping_mib": round(rss2 / 1024, 1),
            "conn_kb_per_idle": round((rss1 - rss0) / max(ok, 1), 2),
            "conn_kb_after_ping": round((rss2 - rss0) / max(ok, 1), 2),
            "logins": ok, "login_wall_s": round(wall, 3), "logins_per_s": round(ok / wall, 1),
            "gateway_cpu_s": round(cpu, 3), "gateway_cpu_us_per_login": round(cpu * 1e6 / max(ok, 1), 1),
            "client_cpu_s": round(sum(o["cpu_s"] for o in opened), 3), "listen_overflows": drops,
            "alive": sum(p["alive"] for p in pings) + 0, "pong": sum(p["pong"] for p in pings),
            "clients": clients, "concurrency": concurrency, "loadavg": [round(x, 2) for x in os.getloadavg()],
        }
        report(f"conn: {held} idle TLS connections, {figures['conn_kb_per_idle']} KiB each "
               f"({figures['conn_kb_after_ping']} after a PING), {figures['logins_per_s']} logins/s "
               f"(gateway {figures['gateway_cpu_us_per_login']} us CPU per login, clients {figures['client_cpu_s']} s)")
        return figures
    finally:
        for p in procs:
            p.stop()
        gateway.stop()
        if made:
            shutil.rmtree(base, ignore_errors=True)


def conn_line(figures: dict) -> str:
    """The fields the perf line gains: `conn_kb_per_idle=… logins_per_s=…`."""
    return f"conn_kb_per_idle={figures['conn_kb_per_idle']:.1f} logins_per_s={figures['logins_per_s']:.0f}"


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python -m qim.dev.perf_conn`: the step alone; prints its JSON and the line fields.
    Exit 1 with the reason when it cannot run."""
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--connections", type=int, default=int(env("PERF_CONNECTIONS", "10000")))
    p.add_argument("--clients", type=int, default=int(env("PERF_CONN_CLIENTS", "2")))
    p.add_argument("--concurrency", type=int, default=int(env("PERF_CONN_CONCURRENCY", "64")))
    p.add_argument("--json", default=env("PERF_CONN_JSON", ""))
    p.add_argument("--profile", default="", help="py-spy raw samples of the gateway during the logins")
    p.add_argument("--gateway-source", default="", help="run the gateway from DIR/qim (a before/after baseline)")
    args = p.parse_args(argv)
    try:
        figures = run(args.connections, args.clients, args.concurrency, report=lambda s: print(s, file=sys.stderr),
                      profile=args.profile or None, gateway_source=args.gateway_source or None)
    except ConnStepError as exc:
        print(f"perf-conn: {exc}", file=sys.stderr)
        return 1
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    print(json.dumps(figures))
    print(f"perf-conn: {conn_line(figures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
