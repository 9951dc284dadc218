"""Capacity of the NotificationService (issue 39; docs/decisions/0135, 0145): how many
alerts one qim-notify node makes per second, and its CPU per alert, when it has a
backlog to work through, against the local APNs endpoint of the tests.

    .venv/bin/python benches/notify_capacity.py [--devices 500] [--messages 4000] [--senders 8]

A private stack (engines and services of its own, stopped at the end) with one notify
node, stopped before the traffic; `--devices` phones registered for APNs and closed;
`--messages` direct messages from `--senders` senders, round-robin over the phones, all
committed and in the session projection (its lag 0) before the node starts again; then
the node's CPU (/proc, user + system) and the wall time from its /healthz 200 until the
endpoint accepted one alert per message. The soak (tests/scale/test_notify_soak.py)
measures the same at the traffic's pace, where the node's idle work weighs in; this is
the figure without it. Last line:

    notify: devices=… messages=… pushes_per_s=… notify_cpu_ms_per_push=… load1=…

Exit 1 (with the reason) if an alert is missing, doubled or carries another badge than
the message count of its phone: a figure of a service that does not work is none.
The machine may be shared: the figures are upper bounds of the cost.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e.sdkclient import close_all  # noqa: E402
from tests.fixtures import running_stack  # noqa: E402
from tests.notify.servicefakes import OFFLINE_S, ThreadedApns  # noqa: E402
from tests.scale.notify_soak import connected, cpu_by_process, phones_of, scrape  # noqa: E402
from tests.sdk.realstack import users  # noqa: E402

DRAIN_S = 600.0  # the most the backlog may take (a loaded machine), then it is an error


def session_lag(st) -> float:
    """The session projection's dispatch lag over its nodes (records)."""
    return sum(scrape(st, n).get("qim_session_dispatch_lag", 0.0) for n in st.names if n.startswith("session"))


async def backlog(st, tmp: Path, devices: int, messages: int, senders: int) -> dict[str, int]:
    """Phones, then the messages to them; {token: messages it is due}."""
    people = users(devices + senders)
    phones, setup_s = await phones_of(st, tmp, people[:devices])
    print(f"notify: {devices} phones registered and closed in {setup_s:.0f} s", flush=True)
    clients = await connected(st, tmp, people[devices:], 1)
    them = list(phones)
    due: Counter = Counter()

    async def send(i: int) -> None:
        convs: dict[int, bytes] = {}
        for k in range(i, messages, senders):
            to = them[k % devices]
            if to not in convs:
                convs[to] = (await clients[i].open_direct(to)).conversation_id
            await clients[i].send_text(convs[to], f"bench {k}")
            due[phones[to].token] += 1
    began = time.monotonic()
    await asyncio.gather(*(send(i) for i in range(senders)))
    print(f"notify: {messages} messages sent in {time.monotonic() - began:.0f} s", flush=True)
    await close_all(*clients)
    return dict(due)


async def measure(args: argparse.Namespace, base: Path) -> int:
    """The bench (module doc); the exit code."""
    apns = ThreadedApns().start(base / "apns")
    try:
        with running_stack(base / "stack", extra_env=apns.env, nodes={"notify": 1}) as st:
            st.stop_service("notify")
            due = await backlog(st, base, args.devices, args.messages, args.senders)
            await asyncio.sleep(OFFLINE_S)
            deadline = time.monotonic() + DRAIN_S
            while session_lag(st) > 0 and time.monotonic() < deadline:  # noqa: ASYNC110 (a metric, no event)
                await asyncio.sleep(1.0)
            st.start_service("notify")
            await asyncio.to_thread(st.wait_ready, ["notify"])
            cpu0, began, load = cpu_by_process(st)["notify"], time.monotonic(), os.getloadavg()[0]
            while len(apns.fake.accepted) < args.messages and time.monotonic() < deadline + DRAIN_S:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            took, cpu = time.monotonic() - began, cpu_by_process(st)["notify"] - cpu0
            load = max(load, os.getloadavg()[0])
            got = Counter(r.token for r in list(apns.fake.accepted))
            per_message = Counter((r.token, r.payload["qim"]["message"]) for r in list(apns.fake.accepted))
            last: dict[str, tuple[int, int]] = {}  # token -> (badge_version, badge) of its newest alert
            for r in list(apns.fake.accepted):
                last[r.token] = max(last.get(r.token, (0, 0)), (r.payload["qim"]["badge_version"],
                                                                r.payload["aps"]["badge"]))
    finally:
        apns.stop()
    wrong = [t for t, n in due.items() if got.get(t) != n or last.get(t, (0, -1))[1] != n]
    if wrong or any(n > 1 for n in per_message.values()):
        print(f"notify: broken: {len(wrong)} phones with another count or badge than their messages", file=sys.stderr)
        return 1
    print(f"notify: devices={args.devices} messages={args.messages} seconds={took:.1f} "
          f"pushes_per_s={args.messages / took:.1f} notify_cpu_ms_per_push={1000 * cpu / args.messages:.2f} "
          f"load1={load:.1f} (one node; upper bounds on a shared machine)")
    return 0


def main() -> int:
    """Parse the options, run the bench in a temporary directory."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", type=int, default=500)
    p.add_argument("--messages", type=int, default=4000)
    p.add_argument("--senders", type=int, default=8)
    args = p.parse_args()
    if min(args.devices, args.messages, args.senders) < 1:
        p.error("--devices, --messages and --senders are positive")
    with tempfile.TemporaryDirectory(prefix="qim-notify-bench-") as tmp:
        return asyncio.run(measure(args, Path(tmp)))


if __name__ == "__main__":
    sys.exit(main())
