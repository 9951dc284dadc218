"""Direct records behind a shard's group backlog, with and without overtakes
(docs/decisions/0142; issue 41 "direct messages never wait behind a group").

`.venv/bin/python benches/overtake.py [--shards 8] [--groups 600] [--members 16]
[--every 40] [--rounds 2]`: a private Redis and the real MailboxMaterializer over the
Redis MailboxStore, fed by an in-process stand-in of the dispatch partitions. Each of
`--shards` shards gets `--groups` group records of `--members` members (a 1,000-member
group's share of a shard on 64 shards is about 16) with a direct record after every
`--every` of them, all queued at once (a backlog, as the group step of `make perf`
leaves one). Prints, for overtakes off and on (alternating, `--rounds` each): each
direct record's wait from the start until its push (P50, P99, max, ms) and the time
until every record of every shard was materialized (the group's drain: entries a
second), and this process's CPU (the materializer's Python and the Redis client; Redis
is another process) per 1,000 entries. Wall-clock figures of one process on a shared
machine: compare within a run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME  # noqa: E402

from qim._core import ids, watermark  # noqa: E402
from qim._core import mailbox_seq as mseq  # noqa: E402
from qim._core.types import MessageCoord  # noqa: E402
from qim.dev.redis_engine import start_redis  # noqa: E402
from qim.faults import MAILBOX_POINTS, FaultPoints  # noqa: E402
from qim.infra.redis.client import connect  # noqa: E402
from qim.services.mailbox.materializer import MailboxMaterializer  # noqa: E402
from qim.stores.redis.mailboxes import RedisMailboxStore  # noqa: E402
from qim.wire.dispatch import Dispatch  # noqa: E402

TENANT = 0
NOW_MS = time.time_ns() // 1_000_000


class Log:
    """The dispatch partitions: every record handed out by the first consumes."""

    def __init__(self, records: list) -> None:
        self.pending = records

    async def assign(self, topic: str, starts: dict) -> None:
        pass

    async def high_watermarks(self, topic: str, parts: list) -> dict:
        return {p: 0 for p in parts}

    async def consume(self, n: int, timeout: float) -> list:
        out, self.pending = self.pending[:n], self.pending[n:]
        await asyncio.sleep(0.001)
        return out

    async def pause(self, topic: str, parts: list) -> None:
        pass

    async def resume(self, topic: str, parts: list) -> None:
        pass

    async def close(self) -> None:
        pass


def records(shards: int, groups: int, members: int, every: int, base: int) -> tuple[list, set]:
    """The shards' records (interleaved by offset) and the (shard, offset) of the direct ones."""
    out, directs = [], set()
    for shard in range(shards):
        group = tuple(base + shard * 10_000 + i for i in range(members))
        offset = 0
        for g in range(groups):
            for direct in ((False, True) if (g + 1) % every == 0 else (False,)):
                mid = b"M" + shard.to_bytes(3, "big") + offset.to_bytes(12, "big")
                rcpt: tuple[int, ...]
                if direct:
                    a, b = base + 9_000_000 + 2 * offset, base + 9_000_001 + 2 * offset
                    conv, rcpt, cmid = ids.conversation_id_direct(TENANT, a, b), (b,), b""
                    sender = a
                    directs.add((shard, offset))
                else:
                    conv, rcpt, cmid, sender = ids.conversation_id_group(TENANT, 5 + shard), group, b"c" * 16, group[0]
                coord = MessageCoord(mid, conv, offset + 1, sender, NOW_MS, 1, b"")
                value = Dispatch(TENANT, b"D" + mid[1:], coord, shard, cmid, rcpt, None).encode()
                out.append((offset, shard, value))
                offset += 1
    out.sort()
    appended = (TIMESTAMP_LOG_APPEND_TIME, NOW_MS)  # the reader times direct records' read lag
    return [SimpleNamespace(partition=lambda s=s: s, offset=lambda o=o: o, value=lambda v=v: v,
                            timestamp=lambda: appended) for o, s, v in out], directs


async def one(addr: str, args: argparse.Namespace, overtake: bool, base: int) -> dict:
    """One run: the waits of the direct records (ms) and the drain (s)."""
    client = connect(addr)
    await client.flushall()
    msgs, directs = records(args.shards, args.groups, args.members, args.every, base)
    seqs = {mseq.compose(1, o): (s, o) for s, o in directs}
    waits: list[float] = []
    t0 = time.perf_counter()

    def push(tenant, seq, users, event, trace, inline) -> None:
        if seq in seqs and len(users) == 1:
            waits.append((time.perf_counter() - t0) * 1000)

    m = MailboxMaterializer("unused:1", RedisMailboxStore(client), list(range(args.shards)), push,
                            FaultPoints("", MAILBOX_POINTS), consumer=Log(msgs), overtake=overtake)  # type: ignore[arg-type]
    await m.start()
    t0, cpu0 = time.perf_counter(), time.process_time()
    task = asyncio.get_running_loop().create_task(m.run())
    last = {s: max(o for (ss, o) in [(x.partition(), x.offset()) for x in msgs] if ss == s) for s in range(args.shards)}
    while any(watermark.start_offset(m.shards[s].blob) <= last[s] for s in m.shards):  # noqa: ASYNC110 - W is not signalled
        if task.done():  # the materializer died: say why instead of waiting for ever
            raise RuntimeError(f"the materializer stopped: {task.exception()!r}")
        if any(s.dirty for s in m.shards.values()):
            raise RuntimeError(f"a shard stopped: {m.dirty_reasons}")
        await asyncio.sleep(0.01)
    drain, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await client.aclose()
    waits.sort()
    entries = args.shards * args.groups * args.members + len(directs)
    return {"p50": waits[len(waits) // 2], "p99": waits[min(len(waits) - 1, int(len(waits) * 0.99))],
            "max": waits[-1], "directs": len(waits), "drain_s": drain, "entries_per_s": entries / drain,
            "cpu_ms_per_1k": cpu * 1e6 / entries}


def main() -> None:
    """Run the bench (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--groups", type=int, default=600)
    p.add_argument("--members", type=int, default=16)
    p.add_argument("--every", type=int, default=40)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="qim-bench-overtake-") as tmp:
        engine = start_redis(Path(tmp) / "redis", die_with_parent=True)  # a killed bench leaves no Redis
        try:
            for r in range(args.rounds):
                for overtake in (False, True):
                    f = asyncio.run(one(engine.addr, args, overtake, 1000 + r))
                    print(f"overtake={'on ' if overtake else 'off'} round={r + 1} directs={f['directs']} "
                          f"wait_ms p50={f['p50']:.0f} p99={f['p99']:.0f} max={f['max']:.0f} "
                          f"drain_s={f['drain_s']:.2f} entries_per_s={f['entries_per_s']:.0f} "
                          f"cpu_ms_per_1k={f['cpu_ms_per_1k']:.1f}", flush=True)
        finally:
            engine.stop()


if __name__ == "__main__":
    main()
