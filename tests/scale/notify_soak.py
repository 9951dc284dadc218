"""The offline push soak's parts (issue 39; docs/decisions/0135, 0145), used by
tests/scale/test_notify_soak.py: its size from the environment, the offline phones made
a few at a time, the mixed traffic (senders at a fixed pace, reads on a second device of
every tenth user, bursts of provider faults), the end checks and the figures.

Sizes: NOTIFY_SOAK_DEVICES (default 200) offline phones, NOTIFY_SOAK_MINUTES (default 3)
of traffic at NOTIFY_SOAK_RATE (default 20) messages per second over all senders;
`make test-scale` runs the defaults, `make soak-notify` the issue's figure (1,000 devices,
20 minutes). The figures (printed, one line each, prefix `soak-notify:`) are CPU per push
of every process of the stack from /proc, pushes per second and the load average sampled
every 10 s while the traffic runs: the machine is shared, so they are upper bounds."""

from __future__ import annotations

import asyncio
import os
import random
import time
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from tests.e2e.sdkclient import client
from tests.notify.servicefakes import offline_phone

NODES = ("notify", "notify2")
FAULTS = ("500", "429", "slow")
SENDERS = 4
SETUP_CONCURRENCY = 16  # phones logged in, registered and closed at once (the gateway admits logins in parallel)


@dataclass(frozen=True)
class Size:
    """`devices` offline phones, `seconds` of traffic at `rate` messages per second."""

    devices: int
    seconds: float
    rate: float


def size_from_env() -> Size:
    """The soak's Size from NOTIFY_SOAK_DEVICES / _MINUTES / _RATE (module doc); a value
    that is not a positive number is a ValueError naming the variable."""
    def positive(var: str, default: str) -> float:
        raw = os.environ.get(var, default)
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"{var}={raw!r}: a positive number") from None
        if value <= 0:
            raise ValueError(f"{var}={raw!r}: a positive number")
        return value
    return Size(int(positive("NOTIFY_SOAK_DEVICES", "200")), 60.0 * positive("NOTIFY_SOAK_MINUTES", "3"),
                positive("NOTIFY_SOAK_RATE", "20"))


def scrape(st: Any, name: str) -> dict[str, float]:
    """Every sample line of node `name`'s /metrics: {"metric{labels}": value}."""
    text = urllib.request.urlopen(f"http://{st.metrics[name]}/metrics", timeout=5).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def by_label(sample: dict[str, float], metric: str, label: str) -> dict[str, float]:
    """`metric`'s samples summed by the value of `label`."""
    out: dict[str, float] = defaultdict(float)
    for key, value in sample.items():
        if key.startswith(metric + "{"):
            out[key.split(f'{label}="', 1)[1].split('"', 1)[0]] += value
    return dict(out)


def lag(st: Any) -> float:
    """qim_notify_lag_records summed over the notify nodes."""
    return sum(scrape(st, n).get("qim_notify_lag_records", 0.0) for n in NODES)


def cpu_by_process(st: Any) -> dict[str, float]:
    """CPU seconds (user + system) each service process of the stack used so far (/proc)."""
    out = {}
    for name, pid in st.pids.items():
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[name] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


async def phones_of(st: Any, tmp_path: Any, them: list[int]) -> tuple[dict[int, Any], float]:
    """({user: Phone}, seconds taken): every user's device 1 logged in, registered for
    APNs and closed, SETUP_CONCURRENCY at a time."""
    gate = asyncio.Semaphore(SETUP_CONCURRENCY)

    async def one(u: int) -> Any:
        async with gate:
            return await offline_phone(st, tmp_path, u, 1)
    began = time.monotonic()
    made = await asyncio.gather(*(one(u) for u in them))
    return dict(zip(them, made)), time.monotonic() - began


@dataclass
class Traffic:
    """The traffic of one soak: `sent` messages, the conversations (sender, user) -> id."""

    st: Any
    apns: Any
    size: Size
    them: list[int]
    senders: list[Any]
    laptops: dict[int, Any]
    sent: int = 0
    reads: int = 0
    bursts: int = 0  # fault bursts injected
    convs: dict[tuple[int, int], bytes] = field(default_factory=dict)
    load: list[float] = field(default_factory=list)

    async def run(self) -> None:
        """Senders, readers, faults and the load sampler until the soak's time is up."""
        stop = time.monotonic() + self.size.seconds
        await asyncio.gather(*(self._send(i, stop) for i in range(len(self.senders))), self._read(stop),
                             self._faults(stop), self._sample(stop))
        self.apns.fake.mode, self.apns.fake.delay_s = "ok", 0.0

    async def _send(self, i: int, stop: float) -> None:
        # paced by a schedule, not a sleep after each send: the rate holds while sends are slow
        period, s = len(self.senders) / self.size.rate, self.senders[i]
        due = time.monotonic() + random.uniform(0, period)
        while due < stop:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            to = random.choice(self.them)
            if (i, to) not in self.convs:
                self.convs[(i, to)] = (await s.open_direct(to)).conversation_id
            await s.send_text(self.convs[(i, to)], f"soak {self.sent}")
            self.sent += 1
            due = max(due + period, time.monotonic() - period)

    async def _read(self, stop: float) -> None:
        while time.monotonic() < stop:
            await asyncio.sleep(2.0)
            u = random.choice(list(self.laptops))
            for (_, to), conv in list(self.convs.items()):
                if to == u:
                    await self.laptops[u].mark_read(conv)
                    self.reads += 1

    async def _faults(self, stop: float) -> None:
        # bursts of a fault (up to 1 s) between calm spells (3-6 s): a retry (RetryPolicy:
        # 0.25 s doubling, never sooner than Retry-After 1 s) lands in a calm spell before
        # its 8 attempts are spent, so none may end failed (decision 0135, "Tests")
        fake = self.apns.fake
        fake.retry_after = "1"
        while time.monotonic() < stop:
            await asyncio.sleep(random.uniform(3.0, 6.0))
            mode = random.choice(FAULTS)
            fake.mode = "ok" if mode == "slow" else mode
            fake.delay_s = 1.0 if mode == "slow" else 0.0
            self.bursts += 1
            await asyncio.sleep(random.uniform(0.3, 1.0))
            fake.mode, fake.delay_s = "ok", 0.0

    async def _sample(self, stop: float) -> None:
        while time.monotonic() < stop:
            self.load.append(os.getloadavg()[0])
            await asyncio.sleep(10.0)


async def connected(st: Any, tmp_path: Any, users: list[int], device: int) -> list[Any]:
    """Connected clients of `users` on `device`."""
    out = []
    for u in users:
        c = await client(st, tmp_path, u, device)
        await c.connect()
        out.append(c)
    return out


def endings(apns: Any, phones: dict[int, Any]) -> tuple[dict[str, dict], dict[str, Counter]]:
    """({token: the payload of its highest badge_version accepted}, {token: alerts
    accepted per message}) in one pass over what the endpoint accepted."""
    last: dict[str, dict] = {}
    per_message: dict[str, Counter] = defaultdict(Counter)
    tokens = {p.token for p in phones.values()}
    for r in list(apns.fake.accepted):
        if r.token not in tokens:
            continue
        if r.token not in last or r.payload["qim"]["badge_version"] > last[r.token]["qim"]["badge_version"]:
            last[r.token] = r.payload
        if "content-available" not in r.payload["aps"]:
            per_message[r.token][r.payload["qim"]["message"]] += 1
    return last, per_message


def figures(size: Size, traffic: Traffic, setup_s: float, took_s: float, cpu: dict[str, float],
            idle: dict[str, float], nodes: dict[str, dict[str, float]]) -> list[str]:
    """The report lines (module doc). `cpu`: CPU seconds per process during the traffic
    and the drain; `idle`: CPU seconds per second of each process before the traffic;
    `nodes`: per notify node, its pushes made (alerts and silent updates sent) and its
    provider answers retried (`retries`)."""
    pushes = sum(nodes[n]["pushes"] for n in NODES)
    lines = [f"soak-notify: devices={size.devices} minutes={size.seconds / 60:.1f} messages={traffic.sent} "
             f"reads={traffic.reads} fault_bursts={traffic.bursts} retries={sum(nodes[n]['retries'] for n in NODES):.0f} "
             f"setup_s={setup_s:.0f} ({size.devices / max(setup_s, 1e-9):.1f} phones/s)",
             f"soak-notify: pushes={pushes:.0f} in {took_s:.0f} s = {pushes / took_s:.1f}/s; "
             f"load average (1 min) mean={sum(traffic.load) / max(len(traffic.load), 1):.2f} "
             f"max={max(traffic.load, default=0.0):.2f} on {os.cpu_count()} cores (figures are upper bounds)"]
    for n in NODES:
        made = max(nodes[n]["pushes"], 1)
        lines.append(f"soak-notify: {n} pushes={nodes[n]['pushes']:.0f} cpu_s={cpu.get(n, 0.0):.1f} "
                     f"ms_per_push={1000 * cpu.get(n, 0.0) / made:.2f} idle_ms_per_s={1000 * idle.get(n, 0.0):.1f}")
    others = ", ".join(f"{k}={1000 * v / max(pushes, 1):.2f}" for k, v in sorted(cpu.items()) if k not in NODES)
    lines.append(f"soak-notify: other processes' CPU ms per push (all their work, not only push): {others}")
    return lines
