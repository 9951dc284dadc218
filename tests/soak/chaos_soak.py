"""`make soak`: a chaos soak of the several-node stack (docs/operations.md "Chaos soak").

Every failure must heal itself: for SOAK_MINUTES (20 by default) a supervised stack of
two gateways, two writers, three mailbox nodes, two session nodes, two fanout and two
archiver nodes and a room node, on three Kafka brokers, one Redis and a Cassandra node,
carries traffic (frame-level conversations across the gateways and paired SDK clients
whose view is checked) while a fault is injected every SOAK_FAULT_EVERY_S seconds in
turn: a SIGKILL and a SIGSTOP of a node of every kind, Redis SIGKILLed and restarted on
its AOF, a broker SIGKILLed (restarted later) and paused, Cassandra paused. Nobody
restarts anything but the stack's supervisor.

It fails (exit 1, naming what) unless, at the end and without a person:
- every service answers /healthz 200 within HEAL_DEADLINE_S of the last fault;
- every ACKed message was told once and in order to its recipient (frame-level mailboxes
  and the SDK lane's verdict) and `qimctl audit dispatch` reads four zeros;
- no service's RSS grew by more than RSS_BOUND_MB over the run's second half (a process
  restarted in that half is measured from its restart).
The last line is `soak: minutes=… faults=… … lost=0 …` (docs/status.md keeps the last one).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from qim.dev.stack import Stack
from tests.fixtures import running_stack
from tests.scale.harness import Load, blocking, kind

NODES = {"gateway": 2, "writer": 2, "mailbox": 3, "session": 2, "fanout": 2, "archiver": 2, "room": 1}
KINDS = ("gateway", "writer", "mailbox", "session", "fanout", "archiver", "room")
LEASE_ENV = {"QIM_SHARD_LEASE_MS": "6000", "QIM_SHARD_RENEW_MS": "1000"}
HEAL_DEADLINE_S = 120.0
RSS_BOUND_MB = 40.0
PAUSE_S = (5.0, 15.0)
BROKER_RESTART_S = 300.0


def healthz(st: Stack, name: str) -> bool:
    """True when instance `name` answers /healthz 200 now."""
    try:
        with urllib.request.urlopen(f"http://{st.metrics[name]}/healthz", timeout=2) as r:
            return r.status == 200
    except Exception:  # noqa: BLE001 — refused, 503 or a timeout: not healthy
        return False


def unhealthy(st: Stack) -> list[str]:
    return [n for n in st.names if not healthz(st, n)]


def current_pids(st: Stack) -> dict[str, int]:
    """The supervisor's record of each service's current pid (it changes on restart)."""
    now = Stack.load(st.dir)
    return dict(now.pids) if now is not None else dict(st.pids)


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class Faults:
    """The rotation of faults and what each one did (`log`), with heal times."""

    def __init__(self, st: Stack, rng: random.Random) -> None:
        self.st, self.rng = st, rng
        self.log: list[str] = []
        self.heal_s: list[float] = []
        self._later: list[asyncio.Task] = []
        names = [f"kill:{k}" for k in KINDS] + [f"pause:{k}" for k in KINDS]
        self.plan = names + ["redis-restart", "broker-kill", "broker-pause", "cassandra-pause"]
        rng.shuffle(self.plan)

    def _node(self, k: str) -> str:
        return self.rng.choice([n for n in self.st.names if kind(n) == k])

    async def _pause(self, pid: int, seconds: float) -> None:
        os.kill(pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(seconds)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    async def inject(self, i: int) -> str:
        """Inject fault number `i` of the rotation; returns its description."""
        what = self.plan[i % len(self.plan)]
        es = self.st.engines
        pause = self.rng.uniform(*PAUSE_S)
        if what.startswith("kill:"):
            name = self._node(what[5:])
            os.kill(current_pids(self.st)[name], signal.SIGKILL)
            what = f"SIGKILL {name}"
        elif what.startswith("pause:"):
            name = self._node(what[6:])
            await self._pause(current_pids(self.st)[name], pause)
            what = f"SIGSTOP {name} {pause:.0f}s"
        elif what == "redis-restart":
            # past the lease: every owner's lease runs out while Redis is away (issue item 1)
            await blocking(es.redis.kill)
            await asyncio.sleep(8)
            await blocking(es.redis.start, 60)
            what = "redis SIGKILL, restarted on its AOF after 8s"
        elif what == "broker-kill":
            broker = self.rng.choice([k for k in es.kafkas if k.alive()])
            await blocking(broker.kill)
            self._later.append(asyncio.get_running_loop().create_task(self._restart_later(broker)))
            what = "broker SIGKILL (restarted 30s later)"
        elif what == "broker-pause":
            await self._pause(self.rng.choice([k for k in es.kafkas if k.alive()]).pid, pause)
            what = f"broker SIGSTOP {pause:.0f}s"
        elif what == "cassandra-pause":
            await self._pause(es.cassandra.pid, pause)
            what = f"cassandra SIGSTOP {pause:.0f}s"
        self.log.append(what)
        return what

    async def _restart_later(self, broker) -> None:
        await asyncio.sleep(30)
        # a KRaft broker recovering its log after SIGKILL on a busy 2-core host takes minutes
        await blocking(broker.start, BROKER_RESTART_S)

    async def settle(self) -> None:
        """Wait for restarted brokers, then until every service is healthy (records the time)."""
        for task in self._later:
            await task
        self._later.clear()
        t0 = time.monotonic()
        while unhealthy(self.st):
            if time.monotonic() - t0 > HEAL_DEADLINE_S:
                raise AssertionError(f"still unhealthy {HEAL_DEADLINE_S:.0f}s after the faults: "
                                     f"{unhealthy(self.st)}")
            await asyncio.sleep(1)
        self.heal_s.append(time.monotonic() - t0)


class Memory:
    """Each service's RSS by minute; growth over the run's second half per incarnation."""

    def __init__(self, st: Stack) -> None:
        self.st = st
        self.samples: list[tuple[float, dict[str, tuple[int, float]]]] = []

    def sample(self) -> None:
        row = {}
        for name, pid in current_pids(self.st).items():
            mb = rss_mb(pid)
            if mb is not None:
                row[name] = (pid, mb)
        self.samples.append((time.monotonic(), row))

    def growth(self) -> dict[str, float]:
        """name -> MB grown since the middle of the run (or since the process's restart)."""
        t_mid = self.samples[0][0] + (self.samples[-1][0] - self.samples[0][0]) / 2
        last = self.samples[-1][1]
        out = {}
        for name, (pid, mb) in last.items():
            first = next((row[name][1] for t, row in self.samples
                          if t >= t_mid and name in row and row[name][0] == pid), mb)
            out[name] = mb - first
        return out


def load_failure(load: Load) -> str:
    """The first traffic task that ended with an error (a send never ACKed), or ''."""
    for task in load._tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            return f"{type(task.exception()).__name__}: {task.exception()}"
    return ""


async def soak(base: Path, minutes: float, every_s: float, seed: int) -> int:
    rng = random.Random(seed)
    env = {**LEASE_ENV}
    started = time.monotonic()
    print(f"soak: starting engines (3 brokers, Redis, Cassandra) and a supervised stack in {base}", flush=True)
    with running_stack(base, supervise=True, nodes=NODES, extra_env=env,
                       engines_kw={"brokers": 3, "outbox_partitions": 2, "with_cassandra": True}) as st:
        print(f"soak: stack ready in {time.monotonic() - started:.0f}s: {', '.join(st.names)}", flush=True)
        gws = st.gateway_addrs
        pairs = [(rng.getrandbits(40) + 1, rng.getrandbits(40) + 1) for _ in range(6)]
        load = await Load(st, pairs=pairs, sdk=8, rate=16.0).start()
        faults, memory = Faults(st, rng), Memory(st)
        memory.sample()
        t_end = time.monotonic() + minutes * 60
        i, next_sample = 0, time.monotonic() + 60
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            what = await faults.inject(i)
            i += 1
            print(f"soak: {(t0 - started) / 60:5.1f} min fault {i}: {what}", flush=True)
            while time.monotonic() < t0 + every_s:
                failed = load_failure(load)
                if failed:
                    raise AssertionError(f"traffic stopped after fault {i} ({what}): {failed}")
                if time.monotonic() >= next_sample:
                    memory.sample()
                    next_sample += 60
                await asyncio.sleep(1)
        await faults.settle()
        memory.sample()
        sent = sum(len(c.order) for c in load.convs)
        await load.check()  # every ACK told once and in order, lane verdict, audit zeros
        growth = memory.growth()
        worst = max(growth, key=growth.get)
        print(f"soak: gateways={len(gws)} restarts={Stack.load(st.dir).restarts}", flush=True)
        print(f"soak: minutes={minutes:g} faults={i} fault_kinds={len(set(faults.plan[:i]))}/{len(faults.plan)} "
              f"frame_messages={sent} lost=0 duplicated=0 audit=0 unhealthy_at_end=0 "
              f"heal_s={faults.heal_s[-1]:.1f} rss_growth_mb_max={growth[worst]:.1f} ({worst})", flush=True)
        if growth[worst] > RSS_BOUND_MB:
            print(f"soak: FAILED: {worst} grew {growth[worst]:.1f} MB over the second half "
                  f"(bound {RSS_BOUND_MB:g})", file=sys.stderr)
            return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.soak.chaos_soak", description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", "20")))
    p.add_argument("--fault-every", type=float, default=float(os.environ.get("SOAK_FAULT_EVERY_S", "30")))
    p.add_argument("--seed", type=int, default=int(os.environ.get("SOAK_SEED", str(random.getrandbits(31)))))
    p.add_argument("--dir", type=Path, default=None, help="work directory (default: a new temporary one)")
    a = p.parse_args(argv)
    if a.minutes <= 0 or a.fault_every < 10:
        p.error("--minutes must be > 0 and --fault-every at least 10 s")
    print(f"soak: seed={a.seed} (SOAK_SEED={a.seed} repeats the order of faults)", flush=True)
    base = a.dir or Path(tempfile.mkdtemp(prefix="qim-soak-"))
    try:
        return asyncio.run(soak(base, a.minutes, a.fault_every, a.seed))
    except AssertionError as exc:
        print(f"soak: FAILED: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
