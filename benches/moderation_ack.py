"""What the before-send verdict costs on the ACK path (issue 38; docs/decisions/0126).

`.venv/bin/python benches/moderation_ack.py [--rate 100] [--duration 20] [--out DIR]`:
private engines and one stack (qim.dev), then the writer restarted three times, each
followed by one `qim-loadgen rate` run:

- `none`: no QIM_SEND_POLICY (the seam is skipped);
- `inproc`: QIM_SEND_POLICY=benches.moderation_ack:wordlist, a synchronous Python rule
  (masks a word list; the in-process policy an operator installs);
- `webhook`: QIM_SEND_POLICY=qim.policy.webhook:policy asking a webhook on loopback
  (plain HTTP, allowed for loopback) that answers 200 after WEBHOOK_DELAY_S (5 ms), in
  a child process.

`--micro N`: no stack; N sequential verdicts through the seam in this process (on
uvloop, as the writer) with the webhook in a child process, then with the word list:
latency p50/p99 and CPU per call of the caller (the writer's side).

Per run it prints ACK p50/p99 (the load generator's), the writer's CPU per acked
message (utime+stime of its pid from /proc) and, with --thread-hook, this process's
CPU per webhook request (the receiver's side). One JSON line per run. Figures of a shared machine are upper
bounds. Not a test: nothing is asserted (speed belongs here, docs/perf.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from aiohttp import web

from qim.policy import ACCEPT, Replace, SendFacts, Verdict

ROOT = Path(__file__).resolve().parent.parent
WEBHOOK_DELAY_S = 0.005
SECRET = "bench-webhook-secret-0123456789"
MASKED = re.compile(rb"\b(darn|heck)\b")


def wordlist(facts: SendFacts) -> Verdict:
    """The in-process policy of the `inproc` run: mask a small word list, else accept."""
    masked = MASKED.sub(b"****", facts.body)
    return ACCEPT if masked == facts.body else Replace(masked)


class Hook:
    """A webhook on 127.0.0.1 answering 200 after WEBHOOK_DELAY_S; `requests` counted."""

    def __init__(self) -> None:
        self.requests = 0
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Hook":
        """Serve in a thread; returns once listening."""
        self._thread.start()
        self._ready.wait(10)
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def verdict(request: web.Request) -> web.Response:
            await request.read()
            self.requests += 1
            await asyncio.sleep(WEBHOOK_DELAY_S)
            return web.Response(status=200)

        async def serve() -> None:
            app = web.Application()
            app.router.add_post("/verdict", verdict)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self.url = f"http://127.0.0.1:{port}/verdict"
            self._ready.set()

        self._loop.run_until_complete(serve())
        self._loop.run_forever()


def cpu_s(pid: int) -> float:
    """utime+stime of `pid` in seconds (qim.dev.perf_report)."""
    from qim.dev.perf_report import read_cpu_s

    return read_cpu_s(pid)


class ChildHook:
    """A Hook in a child process (its CPU and scheduling apart from this one's)."""

    def __init__(self) -> None:
        import multiprocessing

        ours, theirs = multiprocessing.Pipe()
        self.child = multiprocessing.Process(target=_serve_hook, args=(theirs,), daemon=True)
        self.child.start()
        self.url = ours.recv()
        self.requests = 0  # not counted across the process boundary

    def stop(self) -> None:
        """Kill the child."""
        self.child.kill()


def run(stack, label: str, env: dict, args, out: Path, hook) -> dict:
    """Restart the writer with `env`, then one loadgen run; the figures of it."""
    stack.stop_service("writer")
    stack.start_service("writer", extra_env=env)
    stack.wait_ready(["writer"])
    time.sleep(2)
    report = out / f"{label}.json"
    pid = stack.pids["writer"]
    w0, h0, r0 = cpu_s(pid), time.process_time(), hook.requests
    argv = [sys.executable, "-m", "qim.cli.loadgen", "rate", "--rate", str(args.rate), "--duration",
            str(args.duration), "--pairs", "10", "--sdk-clients", "0", "--drain", "10", "--json", str(report)]
    subprocess.run(argv, env={**os.environ, **stack.client_env()}, check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    writer_s, hook_s, asked = cpu_s(pid) - w0, time.process_time() - h0, hook.requests - r0
    doc = json.loads(report.read_text())["total"]
    acked = doc["acked"] if "acked" in doc else doc.get("ack", {}).get("count", 0)
    return {"run": label, "acked": acked, "ack_p50_ms": doc["ack"].get("p50_ms"), "ack_p99_ms": doc["ack"]["p99_ms"],
            "writer_cpu_ms_per_msg": round(writer_s * 1000 / max(acked, 1), 3), "webhook_requests": asked,
            "receiver_cpu_ms_per_request": round(hook_s * 1000 / asked, 3) if asked else None}


def _serve_hook(port_out) -> None:
    """Child process of `micro`: a Hook, its URL sent back, then served until killed."""
    hook = Hook().start()
    port_out.send(hook.url)
    threading.Event().wait()


async def _micro_calls(policy, n: int) -> dict:
    """`n` sequential verdicts through a PolicySeam: latency p50/p99 (ms) and this
    process's CPU per call (ms): what the writer spends per send on the policy."""
    from qim.policy import PolicySeam

    seam = PolicySeam(policy)
    lat = []
    cpu0 = time.process_time()
    for i in range(n):
        facts = SendFacts(kind="direct", tenant=0, user_id=7, device_id=1, conversation_id=b"\x01" * 16,
                          message_type=1, custom_type=b"", body=b"some darn words %d" % i,
                          client_message_id=os.urandom(16))
        t = time.perf_counter()
        await seam.check(facts)
        lat.append(time.perf_counter() - t)
    cpu = time.process_time() - cpu0
    lat.sort()
    return {"p50_ms": round(lat[n // 2] * 1000, 3), "p99_ms": round(lat[int(n * 0.99)] * 1000, 3),
            "cpu_ms_per_call": round(cpu * 1000 / n, 3)}


def micro(n: int) -> None:
    """The verdict alone, no stack: the webhook (a receiver answering in 5 ms in another
    process) and the in-process word list, each through the seam, sequentially."""
    import multiprocessing

    from qim.config.moderation import WebhookConfig, parse_fail_policy
    from qim.policy.webhook import WebhookPolicy

    ours, theirs = multiprocessing.Pipe()
    child = multiprocessing.Process(target=_serve_hook, args=(theirs,), daemon=True)
    child.start()
    url = ours.recv()

    async def both() -> None:
        hook = WebhookPolicy(WebhookConfig(url=url, secret=SECRET, ca_file="", timeout_ms=900,
                                           fail=parse_fail_policy("open"), concurrency=64, breaker_failures=10**6))
        await _micro_calls(hook, 50)  # warm: the connection pool
        print(json.dumps({"run": "micro-webhook", **await _micro_calls(hook, n), "load1": os.getloadavg()[0]}))
        await hook.close()
        print(json.dumps({"run": "micro-inproc", **await _micro_calls(wordlist, n), "load1": os.getloadavg()[0]}))

    try:
        import uvloop

        uvloop.run(both())  # the writer's loop
    finally:
        child.kill()


def main() -> int:
    """Run the three configurations (module doc), or `--micro N` (the verdict alone)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rate", type=float, default=100)
    p.add_argument("--duration", type=float, default=20)
    p.add_argument("--out", default="")
    p.add_argument("--order", default="none,inproc,webhook,none2", help="runs in this order (a digit: again)")
    p.add_argument("--thread-hook", action="store_true", help="the webhook in a thread of this process")
    p.add_argument("--micro", type=int, default=0, help="only the verdict alone, N calls each (no stack)")
    args = p.parse_args()
    if args.micro:
        micro(args.micro)
        return 0
    from qim.dev.engines import EngineSet
    from qim.dev.stack import stack_up

    out = Path(args.out or tempfile.mkdtemp(prefix="qim-modbench-"))
    # the receiver in a child process: in a thread of this one it was starved under load
    # (its answers passed the 500 ms sync timeout; docs/perf.md "Moderation")
    hook = ChildHook() if not args.thread_hook else Hook().start()
    engines = EngineSet.up(out / "engines", die_with_parent=True, with_cassandra=False)
    stack = None
    try:
        stack = stack_up(out / "stack", engines.env(), die_with_parent=True)
        base = {"PYTHONPATH": str(ROOT)}
        webhook = {**base, "QIM_SEND_POLICY": "qim.policy.webhook:policy", "QIM_MODERATION_WEBHOOK_URL": hook.url,
                   "QIM_MODERATION_WEBHOOK_SECRET": SECRET, "QIM_WEBHOOK_FAIL_POLICY": "open"}
        runs = {"none": base, "inproc": {**base, "QIM_SEND_POLICY": "benches.moderation_ack:wordlist"},
                "webhook": webhook}
        for label in args.order.split(","):
            print(json.dumps({**run(stack, label, runs[label.rstrip("0123456789")], args, out, hook),
                              "load1": os.getloadavg()[0]}), flush=True)
    finally:
        if stack is not None:
            stack.down()
        engines.down(timeout=15)
        if isinstance(hook, ChildHook):
            hook.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
