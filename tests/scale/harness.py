"""The scale suite's stack and traffic (docs/design.md §13; docs/operations.md "Several
nodes of each kind"): two nodes of every kind on three Kafka brokers (replication factor
3, min.insync.replicas 2) and two Outbox partitions, a third mailbox and session node
kept stopped for "a node added under traffic"; SDK clients spread over both gateways
(each pair across them) whose view is checked (qim/cli/loadgen_sdkcheck.py); frame-level
conversations aimed at the users of a chosen node; the orphan audit's four counters."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import secrets
import signal
import time
import urllib.request

from qim._core import ids
from qim.cli.loadgen_sdk import SdkLane
from qim.infra.redis.client import connect
from qim.stores.redis.registry import RedisShardRegistry
from qim.wire.devtoken import load_dev_key
from tests.e2e.archive import drop_keyspace
from tests.e2e.chaos import Conversation, delivered_once, run_audit
from tests.e2e.rawclient import RawClient
from tests.fixtures import TEST_SHARD_COUNT, running_stack

LEASE_MS, RENEW_MS = 4000, 500  # a dead owner's shards move within ~4.5 s
OUTBOX_PARTITIONS = 2
# two of every kind; the third mailbox and session node start stopped (added under traffic)
NODES = {"gateway": 2, "writer": 2, "mailbox": 3, "session": 3, "fanout": 2, "archiver": 2}
SPARE = ("mailbox3", "session3")
LISTEN = {"gateway": "QIM_GATEWAY_LISTEN", "mailbox": "QIM_MAILBOX_LISTEN", "session": "QIM_SESSION_LISTEN"}
AUDIT_ZEROS = ("committed_without_dispatch=0 dispatch_without_commit=0 coordinate_mismatch=0 "
               "wrong_partition=0")


def mailbox_store_env() -> dict[str, str]:
    """QIM_MAILBOX_STORE for the scale stack from QIM_TEST_MAILBOX_STORE (unset: the
    default Redis mailbox): `QIM_TEST_MAILBOX_STORE=cql make test-scale` runs the whole
    suite on the CQL MailboxStore (docs/decisions/0102), on the stack's Cassandra."""
    store = os.environ.get("QIM_TEST_MAILBOX_STORE", "").strip()
    return {"QIM_MAILBOX_STORE": store} if store else {}


@contextlib.contextmanager
def scale_stack(base, cassandra):
    """The stack of the module docstring on a fresh keyspace of `cassandra` (dropped after)."""
    keyspace = f"qim_scale_{secrets.token_hex(4)}"
    env = {**cassandra.env(keyspace), "QIM_SHARD_LEASE_MS": str(LEASE_MS), "QIM_SHARD_RENEW_MS": str(RENEW_MS),
           **mailbox_store_env()}
    try:
        with running_stack(base, extra_env=env, nodes=NODES,
                           engines_kw={"brokers": 3, "outbox_partitions": OUTBOX_PARTITIONS}) as st:
            for name in SPARE:
                st.stop_service(name)  # a clean stop: its shards are released at once
            yield st
    finally:
        drop_keyspace(cassandra, keyspace)


def kind(name: str) -> str:
    return name.rstrip("0123456789")


def node_id(st, name: str) -> str:
    """The registry's id of stack instance `name` (QIM_NODE_ID's default: qim/config/registry.py)."""
    var = LISTEN.get(kind(name))
    return f"{kind(name)}@{st.instance_env[name][var] if var else st.metrics[name]}"


def size_of(k: str) -> int:
    return OUTBOX_PARTITIONS if k in ("fanout", "archiver") else TEST_SHARD_COUNT


async def owners(st, k: str) -> dict[int, str]:
    """shard -> node id of its live owner."""
    client = connect(st.env["QIM_REDIS_ADDR"])
    try:
        return {o.shard: o.node_id for o in await RedisShardRegistry(client).owners(k, size_of(k)) if o.live}
    finally:
        await client.aclose()


async def epochs(st, k: str) -> dict[int, int]:
    """shard -> its owner_epoch."""
    client = connect(st.env["QIM_REDIS_ADDR"])
    try:
        return {o.shard: o.owner_epoch for o in await RedisShardRegistry(client).owners(k, size_of(k))}
    finally:
        await client.aclose()


async def until_owned_by(st, k: str, names, timeout: float = 45.0) -> dict[int, str]:
    """Wait until every shard of kind `k` is owned and the owners are exactly `names`."""
    want = {node_id(st, n) for n in names}
    deadline = time.monotonic() + timeout
    while True:
        table = await owners(st, k)
        if len(table) == size_of(k) and set(table.values()) == want:
            return table
        assert time.monotonic() < deadline, f"{k} shards never settled over {sorted(want)}: {table}"
        await asyncio.sleep(0.2)


def running(st, k: str) -> list[str]:
    return [n for n in st.names if kind(n) == k and st.alive(n)]


async def blocking(fn, *args):
    """`fn(*args)` off the event loop (the stack's start, stop and wait calls block while
    the load's clients must go on)."""
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


async def settled(st, timeout: float = 45.0) -> None:
    """Every running node ready, every leased kind spread over its running nodes with
    loads that differ by at most one (the rebalance is over, not only begun), and every
    shard served by its owner (granted is not yet started: qim_shard_owned counts only
    shards whose start finished)."""
    await blocking(st.wait_ready, [n for n in st.names if st.alive(n)])
    for k in ("mailbox", "session", "fanout", "archiver"):
        deadline = time.monotonic() + timeout
        while True:
            table = await until_owned_by(st, k, running(st, k), timeout)
            loads = sorted(list(table.values()).count(n) for n in set(table.values()))
            served = await blocking(served_by, st, running(st, k))
            if loads[-1] - loads[0] <= 1 and served == size_of(k):
                break
            assert time.monotonic() < deadline, f"{k} never settled: loads {loads}, {served} of {size_of(k)} served"
            await asyncio.sleep(0.2)


def served_by(st, nodes: list[str]) -> float:
    """Shards the `nodes` serve now (their keepers' qim_shard_owned)."""
    return sum(metric(st, n, "qim_shard_owned") for n in nodes)


def metric(st, name: str, metric_name: str) -> float:
    """Sum of every sample of `metric_name` on instance `name`'s /metrics."""
    text = urllib.request.urlopen(f"http://{st.metrics[name]}/metrics", timeout=3).read().decode()
    return sum(float(v) for v in re.findall(rf"^{metric_name}(?:{{[^}}]*}})? (\S+)$", text, re.M))


def shard_of(user: int) -> int:
    return ids.user_placement(0, user, TEST_SHARD_COUNT)[2]


def user_on(node: str, table: dict[int, str], avoid_shard: int = -1) -> int:
    """A fresh user whose shard `node` owns (and is not `avoid_shard`)."""
    while True:
        user = random.getrandbits(40) + 1
        s = shard_of(user)
        if table.get(s) == node and s != avoid_shard:
            return user


def audit_is_clean(st) -> None:
    """`qimctl audit dispatch`: the four orphan counters are zero."""
    audit = run_audit(st)
    assert audit.returncode == 0 and AUDIT_ZEROS in audit.stdout, audit.stdout + audit.stderr


class _Client(RawClient):
    """A RawClient whose closed connection is a ConnectionError (the sender reconnects:
    a gateway was killed), not a failed check."""

    async def request(self, opcode: int, body: bytes, timeout: float = 10.0):
        try:
            return await super().request(opcode, body, timeout)
        except AssertionError as exc:
            if "connection closed" in str(exc):
                raise ConnectionError("connection closed") from None
            raise


class CrossConversation(Conversation):
    """A frame-level sender on gateway `addr` (its peer is read back on the other one)."""

    def __init__(self, st, sender: int, peer: int, addr: str) -> None:
        super().__init__(st, sender, peer)
        self.addr = addr

    async def _conn(self) -> RawClient:
        if self.client is None:
            self.client = await _Client.login(self.stack, self.sender, device=random.getrandbits(31) + 1,
                                              addr=self.addr)
        return self.client


class Load:
    """What runs during a fault: `sdk` paired SDK clients over both gateways (`rate`
    msg/s in all) and frame-level conversations for `pairs`, each sender on gateway
    i mod 2. `check()` stops them and asserts every app was told everything once and in
    order (lane verdict, every peer's mailbox) and the audit's four zeros."""

    def __init__(self, st, pairs: list[tuple[int, int]] = (), sdk: int = 8, rate: float = 16.0,
                 sdk_users: int | None = None) -> None:
        self.st = st
        gws = st.gateway_addrs
        self.convs = [CrossConversation(st, a, b, gws[i % len(gws)]) for i, (a, b) in enumerate(pairs)]
        base = sdk_users or random.getrandbits(40) + 1
        self.lane = SdkLane(gws, load_dev_key(st.token_key), sdk, rate, 48, base, st.ca_file) if sdk else None
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task] = []

    async def start(self) -> "Load":
        if self.lane is not None:
            await self.lane.start()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._conv(c, i)) for i, c in enumerate(self.convs)]
        if self.lane is not None:
            self._tasks.append(loop.create_task(self._sdk()))
        await asyncio.sleep(1.0)
        return self

    async def _conv(self, conv: Conversation, i: int) -> None:
        n = 0
        while not self._stop.is_set():
            await conv.send(b"t%d-%d" % (i, n), deadline_s=120)
            n += 1
            await asyncio.sleep(0.05)

    async def _sdk(self) -> None:
        t0 = time.monotonic()
        while not self._stop.is_set():
            await self.lane.send_due(time.monotonic() - t0)
            await asyncio.sleep(0.05)

    async def check(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)
        try:
            for conv in self.convs:
                if conv.client is not None:
                    await conv.client.close()
                    conv.client = None
            for conv in self.convs:
                assert conv.order, "nothing was sent"
                entries = await delivered_once(self.st, conv.peer, conv.order, timeout=120)
                assert [e.message_id for e in entries] == [conv.acks[b].message_id for b in conv.order]
            if self.lane is not None:
                verdict = await self.lane.finish(120)
                assert verdict.acked > 0 and verdict.failures == 0, "\n".join(
                    [verdict.line(), "; ".join(verdict.notes[:5]), *verdict.clients_seen])
        finally:
            if self.lane is not None:
                await self.lane.close()
        audit_is_clean(self.st)


def sdk_base_on(node: str, table: dict[int, str], n: int = 8) -> int:
    """A first user id for `n` lane clients of which at least a quarter sit on `node`'s shards."""
    while True:
        base = random.getrandbits(40) + 1
        if sum(table.get(shard_of(base + i)) == node for i in range(n)) >= n // 4:
            return base


def freeze_all(st, seconds: float) -> None:
    """SIGSTOP every running service, every Redis instance and every live broker at once, SIGCONT them
    all `seconds` later: the whole machine paused (a VM held by its host, as the CI
    machines were seen to do for 1 to 10 s; docs/status.md), every lease running out at once.
    The shared Cassandra node goes on (other modules' stacks use it)."""
    pids = [st.pids[n] for n in st.names if st.alive(n)]
    pids += [r.pid for r in st.engines.redises] + [k.pid for k in st.engines.kafkas if k.alive()]
    stopped = []
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
        time.sleep(seconds)
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):  # every other one still resumed
                os.kill(pid, signal.SIGCONT)
