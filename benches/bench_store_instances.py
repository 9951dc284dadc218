"""The mailbox and session stores on one Redis and on three standalone instances
(docs/decisions/0096, 0097): the same calls, wall time and CPU of this process and of
the Redis instances per materialized record and per registration.

    .venv/bin/python benches/bench_store_instances.py [--rounds 30] [--recipients 20]

Each round: every one of 8 MailboxShards materializes a batch of 32 records (each to
`--recipients` users of the shard) in one fused call, the 8 calls in one event-loop
iteration (as one mailbox node owning them sends them: one pipeline per instance); then
one durable session batch over the 8 shards registers each record's recipients and a
direct sender on another shard (session_project split per instance, the crossing
sender registrations written first). Three private Redis (AOF always) are started
and stopped. Prints one line per layout and their ratio; the answers of the two
layouts are compared (a different answer is an error).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qim._core import ids  # noqa: E402
from qim._core import mailbox_seq as mseq  # noqa: E402
from qim.config.redislayout import RedisLayout  # noqa: E402
from qim.dev.redis_engine import start_redis  # noqa: E402
from qim.stores.mailboxes import FusedRecord, day_of  # noqa: E402
from qim.stores.redis.mailboxes import RedisMailboxStore  # noqa: E402
from qim.stores.redis.sessions import RedisSessionStore  # noqa: E402
from qim.stores.redis.topology import topology_of  # noqa: E402
from qim.stores.sessions import Registration  # noqa: E402

TENANT, SHARDS, RECORDS = 7, 8, 32
DAY = day_of(time.time_ns() // 1_000_000)


def shard_users(layout: RedisLayout, n: int) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {s: [] for s in range(SHARDS)}
    user = 1
    while any(len(v) < n for v in out.values()):
        s = layout.user_shard(TENANT, user)
        if len(out[s]) < n:
            out[s].append(user)
        user += 1
    return out


def redis_cpu(engines) -> float:
    total = 0.0
    for e in engines:
        c = e.client()
        info = c.info("cpu")
        total += info["used_cpu_sys"] + info["used_cpu_user"]
        c.close()
    return total


async def run(layout: RedisLayout, engines, rounds: int, recipients: int) -> tuple[dict, list]:
    topology = topology_of(layout)
    m, s = RedisMailboxStore(topology), RedisSessionStore(topology)
    users = shard_users(layout, recipients)
    answers: list = []
    for shard in range(SHARDS):
        await s.checkpoint_bind(shard, "c|t|8", 1)
    wall = cpu = 0.0
    r0 = redis_cpu(engines)
    for rnd in range(rounds):
        batches = {}
        for shard in range(SHARDS):
            recs = []
            for k in range(RECORDS):
                off = rnd * RECORDS + k
                seq8 = mseq.to_bytes(mseq.compose(1, off))
                recs.append(FusedRecord(TENANT, b"%d:%d" % (shard, off) * 2, b"g" * 32, off, seq8, DAY,
                                        [(u, seq8 + b"e") for u in users[shard]]))
            batches[shard] = recs
        regs = []
        for shard in range(SHARDS):
            peer_shard = users[(shard + 1) % SHARDS]
            for k in range(RECORDS):
                conv = ids.conversation_id_direct(TENANT, peer_shard[k % recipients], users[shard][0])
                regs.append(Registration(TENANT, users[shard][0], conv, 1000 + rnd, 0, peer_shard[k % recipients]))
                regs.append(Registration(TENANT, peer_shard[k % recipients], conv, 1000 + rnd, rnd + 1,
                                         users[shard][0]))
        moves = {shard: (1, rnd, rnd + 1) for shard in range(SHARDS)}
        t0, c0 = time.perf_counter(), time.process_time()
        got = await asyncio.gather(*(m.fused(sh, 1, batches[sh], None if rnd == 0 else b"W%d" % (rnd - 1),
                                             b"W%d" % rnd) for sh in range(SHARDS)))
        added = await s.project("c|t|8", moves, regs)
        wall += time.perf_counter() - t0
        cpu += time.process_time() - c0
        answers.append(([[st for st, _ in g] for g in got], added))
    redis = redis_cpu(engines) - r0
    await topology.aclose()
    records = rounds * SHARDS * RECORDS
    return {"wall_us_per_record": wall / records * 1e6, "client_cpu_us_per_record": cpu / records * 1e6,
            "redis_cpu_us_per_record": redis / records * 1e6}, answers


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--recipients", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        engines = [start_redis(Path(tmp) / f"r{i}", die_with_parent=True) for i in range(3)]
        try:
            a, b, c = (e.addr for e in engines)
            three = RedisLayout((a, b, c), (c, a, b), SHARDS)
            one, ans1 = await run(RedisLayout.single(a, SHARDS), engines, args.rounds, args.recipients)
            for e in engines:
                e.client().flushall()
            spread, ans3 = await run(three, engines, args.rounds, args.recipients)
        finally:
            for e in engines:
                e.stop()
    if ans1 != ans3:
        raise SystemExit("one instance and three answered differently")
    for name, row in (("one instance", one), ("three instances", spread)):
        print(f"{name:16s} " + " ".join(f"{k}={v:.1f}" for k, v in row.items()))
    print("three/one        " + " ".join(f"{k}={spread[k] / one[k]:.2f}" for k in one))


if __name__ == "__main__":
    asyncio.run(main())
