"""History paging across the hot floor: one conversation of 100,000 messages,
the oldest 89,975 archived in CQL (Cassandra 5.0 standing in for ScyllaDB) and trimmed
from Redis, the newest 10,025 hot (one page crosses the seam); a reader pages it all from the newest to the oldest
(OLDER, 50 per page, the SDK's page) through the TieredMessageStore, the one call the
writer's PULL_HISTORY makes. Then half of the archived rows expire (re-written with a
1 s TTL, as retention does: expired cells are tombstones until compaction) and the walk
is repeated over what is left.

Everything goes through the real write path: CommitStore reservations (the writer's
script), the HistoryArchiver's planning and archive writes, the writer's trim with its
check against the archive. Private Redis; a private Cassandra node unless
QIM_BENCH_SCYLLA_ADDR names one (host:port). The numbers are per page at the store
(no gateway, no RPC), on whatever this machine is doing: smoke figures, not capacity.

Last line: `history-seam: messages=N hot_p99_ms=… cold_p99_ms=… seam_p99_ms=…
p99_ms=… p99_ms_after_expiry=…`. Usage: python benches/bench_history_seam.py
[--messages N] [--hot N] [--limit N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qim._core import ids  # noqa: E402
from qim.config.tier import ScyllaConfig  # noqa: E402
from qim.dev.cassandra_engine import start_cassandra  # noqa: E402
from qim.dev.redis_engine import start_redis  # noqa: E402
from qim.proto.v1 import message_pb2  # noqa: E402
from qim.services.archiver.plan import plan  # noqa: E402
from qim.services.writer.trimmer import trim_prefix  # noqa: E402
from qim.stores.commits import CommitRef, Reservation  # noqa: E402
from qim.stores.cql.codec import RECORD_COLUMNS, bucket_of, record_values, tenant_blob  # noqa: E402
from qim.stores.messages import OLDER  # noqa: E402
from qim.stores.open import ArchiveTier, TieredStores  # noqa: E402
from qim.stores.redis.backend import RedisBackend  # noqa: E402

TENANT, SENDER, PEER = 0, 11, 12
CHUNK = 2000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def build(stores: TieredStores, conv: bytes, n: int) -> None:
    """n messages reserved with the writer's script, ids from a per-conversation clock."""
    start = now_ms() - n - 60_000
    rng = random.Random(14)
    for i in range(1, n + 1):
        mid = ids.compose_message_id(start + i, 0, 1, 1)
        cmid = i.to_bytes(16, "big")
        body = bytes(rng.getrandbits(8) for _ in range(rng.choice((40, 120, 400))))
        rec = message_pb2.MessageRecord(tenant_id=tenant_blob(TENANT), message_id=mid, conversation_id=conv,
                                        sender_id=SENDER, sender_device_id=1, client_message_id=cmid,
                                        message_type=1, body=body, created_at_ms=start + i)
        await stores.commits.reserve(Reservation(CommitRef(TENANT, conv, SENDER, cmid), os.urandom(36), mid,
                                                 start + i, rec.SerializeToString(), b"", now_ms(), "bench"))
        if i % 10_000 == 0:
            print(f"  reserved {i}", file=sys.stderr)


async def archive_and_trim(stores: TieredStores, conv: bytes, keep_hot: int) -> None:
    """Archive every message as the archiver would, then trim all but the newest `keep_hot`."""
    tier = stores.archive_tier
    assert tier is not None
    _, rows = await tier.state.hot_rows(TENANT, conv, 1_000_000)
    for i in range(0, len(rows), CHUNK):
        part = rows[i:i + CHUNK]
        recs = [(await stores.redis.messages.get(TENANT, conv, r.message_id)).record for r in part]
        for tenant, batch in plan(recs, {}, 30, now_ms()).items():
            await tier.archive.write(tenant, batch.records, batch.changes)
    cut = len(rows) - keep_hot
    for i in range(0, cut, 512):
        floor, _ = await tier.state.hot_rows(TENANT, conv, 1)
        res = await trim_prefix(tier.state, tier.archive, TENANT, conv, floor, rows[i:min(i + 512, cut)], "default",
                                30, now_ms())
        assert res.trimmed == min(512, cut - i), res


async def walk(stores: TieredStores, conv: bytes, limit: int, floor: int) -> tuple[dict[str, list[float]], list[int]]:
    """Page the whole history OLDER; latencies (ms) by kind (hot, seam, cold) and the seqs seen."""
    lat: dict[str, list[float]] = {"hot": [], "seam": [], "cold": []}
    seqs: list[int] = []
    anchor = 0
    while True:
        t0 = time.perf_counter()
        page = await stores.messages.history_page(TENANT, conv, ((0, None),), anchor, OLDER, limit, 512 * 1024)
        ms = (time.perf_counter() - t0) * 1000
        got = [r.conversation_seq for r in page.records]
        kind = "hot" if got and got[-1] > floor else ("cold" if not got or got[0] <= floor else "seam")
        lat[kind].append(ms)
        seqs += got
        if not page.has_more:
            return lat, seqs
        anchor = got[-1]


async def expire_half(tier: ArchiveTier, conv: bytes, upto: int) -> int:
    """Re-write every other archived message with a 1 s TTL (both tables); how many."""
    s = tier.cql.session
    ks = s.keyspace
    t = tenant_blob(TENANT)
    cols = RECORD_COLUMNS
    marks = ", ".join("?" for _ in cols.split(", "))
    rec_stmt = await s.prepare(f"INSERT INTO {ks}.message_record (tenant, {cols}) VALUES (?, {marks}) "
                               "USING TTL 1 AND TIMESTAMP ?")
    idx_stmt = await s.prepare(f"INSERT INTO {ks}.conversation_history (tenant, bucket, {cols}) VALUES (?, ?, {marks}) "
                               "USING TTL 1 AND TIMESTAMP ?")
    page_seqs = list(range(2, upto + 1, 2))
    archived = await tier.archive.history_rows(TENANT, conv, page_seqs)
    calls = []
    for seq, rec in archived.items():
        assert rec is not None
        values = record_values(rec)
        ts = rec.created_at_ms * 1000 + 5  # after the original write: these cells win, then expire
        calls.append((rec_stmt, (t, *values, ts)))
        calls.append((idx_stmt, (t, bucket_of(seq), *values, ts)))
    await s.execute_many(calls, 64, "expire half")
    return len(archived)


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of `values` (nearest rank)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(label: str, lat: dict[str, list[float]]) -> float:
    every = [v for vs in lat.values() for v in vs]
    parts = " ".join(f"{k}: n={len(v)} p50={pct(v, .5):.2f} p99={pct(v, .99):.2f}" for k, v in lat.items() if v)
    print(f"{label}: pages={len(every)} p50_ms={statistics.median(every):.2f} p99_ms={pct(every, .99):.2f} "
          f"max_ms={max(every):.2f} ({parts})")
    return pct(every, .99)


async def main_async(args: argparse.Namespace, redis_addr: str, scylla: ScyllaConfig) -> str:
    redis = RedisBackend(redis_addr)
    tier = ArchiveTier(redis.client, scylla)
    stores = TieredStores(redis, tier, True)
    try:
        await tier.apply_schema()
        conv = ids.conversation_id_direct(TENANT, SENDER, PEER)
        t0 = time.monotonic()
        await build(stores, conv, args.messages)
        await archive_and_trim(stores, conv, args.hot)
        floor = (await tier.state.floors(TENANT, [conv]))[0]
        print(f"built {args.messages} messages, floor {floor}, in {time.monotonic() - t0:.0f} s", file=sys.stderr)
        lat, seqs = await walk(stores, conv, args.limit, floor)
        assert seqs == list(range(args.messages, 0, -1)), "a gap or a duplicate across the seam"
        p99 = report("all rows", lat)
        expired = await expire_half(tier, conv, floor)
        await asyncio.sleep(2.5)
        lat2, seqs2 = await walk(stores, conv, args.limit, floor)
        want = [s for s in range(args.messages, 0, -1) if s > floor or s % 2]
        assert seqs2 == want, "paging after expiry disagrees with what is left"
        p99_after = report(f"after {expired} archived rows expired", lat2)
        return (f"history-seam: messages={args.messages} hot_p99_ms={pct(lat['hot'], .99):.2f} "
                f"cold_p99_ms={pct(lat['cold'], .99):.2f} seam_p99_ms={pct(lat['seam'], .99):.2f} "
                f"p99_ms={p99:.2f} p99_ms_after_expiry={p99_after:.2f}")
    finally:
        await tier.cql.session.execute(f"DROP KEYSPACE IF EXISTS {scylla.keyspace}")
        await stores.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--hot", type=int, default=10_025, help="newest messages left in Redis (not a multiple of the page:"
                                                           " one page crosses the seam)")
    p.add_argument("--limit", type=int, default=50, help="messages per page")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="qim-bench-seam-") as tmp:
        redis = start_redis(Path(tmp) / "redis", die_with_parent=True)
        cassandra = None
        outside = os.environ.get("QIM_BENCH_SCYLLA_ADDR", "")
        try:
            if outside:
                host, port = outside.rsplit(":", 1)
            else:
                cassandra = start_cassandra(Path(tmp) / "cassandra", die_with_parent=True)
                host, port = "127.0.0.1", str(cassandra.port)
            scylla = ScyllaConfig((host,), int(port), f"qim_bench_{os.getpid()}", allow_single_node_dev=True)
            line = asyncio.run(main_async(args, redis.addr, scylla))
        finally:
            redis.stop()
            if cassandra is not None:
                cassandra.stop()
    print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
