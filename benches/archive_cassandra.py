"""What the archive tier's Cassandra spends per archived message, and on what: a private
Cassandra node (qim/dev/cassandra_engine.py's settings, one of them changed by
`--variant`), written through CqlArchive (qim/stores/cql/archive.py) the way the
archiver writes: `--rate` messages a second over 20 conversations, one batch every
0.5 s (the archiver's fetch wait), 64-byte bodies, no TTL. After 15 s of warm-up it
prints, for each of `--windows` windows of `--seconds`, Cassandra's CPU per message
(/proc/PID/stat), this bench client's (making the records included: not the archiver's
figure), and Cassandra's busiest threads (/proc/PID/task: names without their numbers,
the shared request pool's workers as one row), then its idle CPU per second over 20 s.

    .venv/bin/python benches/archive_cassandra.py --variant batch --rate 250 --windows 3

Variants: `batch` (as shipped: the commit log synced before a write is acknowledged),
`group` (synced every 20 ms, acknowledged after it), `periodic` (synced every 10 s,
acknowledged before: loses acknowledged writes on a crash), `threads4` (4 native
transport and mutation threads instead of 16 and 8), `records16` (message_record rows in
multi-partition UNLOGGED batches of 16 instead of one request each). Figures and what
they showed: docs/perf.md "The archive tier's Cassandra". The node is stopped by pid at
the end (and dies with this process); its data is under `--dir`, which is removed
first only when empty or made by this bench.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import time
from pathlib import Path

from qim.config.tier import ScyllaConfig
from qim.dev._proc import pick_ports
from qim.dev.cassandra_engine import CassandraEngine, ensure_cassandra_jars
from qim.dev.perf_report import parse_proc_stat, read_cpu_s
from qim.proto.v1 import message_pb2
from qim.stores.archive import ArchiveRecord
from qim.stores.cql import schema
from qim.stores.cql.archive import CqlArchive
from qim.stores.cql.session import CqlSession, partition_batch

CONVERSATIONS = 20
BATCH_PERIOD_S = 0.5
MARKER = ".qim-bench-cassandra"  # --dir is removed first only when it holds this (or is empty)
VARIANTS = {  # the cassandra.yaml lines that replace "commitlog_sync: batch", and other swaps
    "batch": (["commitlog_sync: batch"], {}),
    "group": (["commitlog_sync: group", "commitlog_sync_group_window: 20ms"], {}),
    "periodic": (["commitlog_sync: periodic", "commitlog_sync_period: 10000ms"], {}),
    "threads4": (["commitlog_sync: batch"], {"native_transport_max_threads: 16": "native_transport_max_threads: 4",
                                             "concurrent_writes: 8": "concurrent_writes: 4"}),
    "records16": (["commitlog_sync: batch"], {}),
}


class VariantEngine(CassandraEngine):
    """The development node with one variant's settings."""

    variant = "batch"

    def _yaml(self) -> str:
        sync, swaps = VARIANTS[self.variant]
        text = super()._yaml()
        for old, new in {"commitlog_sync: batch": "\n".join(sync), **swaps}.items():
            assert old in text, f"{old!r} is no longer in the development settings"
            text = text.replace(old, new)
        return text


# Cassandra's shared-pool workers rename themselves to the stage they serve at the moment
# (a thread is "Native-Transport-Requests-3" now and "MutationStage-3" a moment later),
# so their CPU is counted per thread id and reported as one row
SHARED_POOL = ("Native-Transport-Requests", "MutationStage", "ReadStage", "SharedPool-Worker", "CounterMutationStage")
SHARED_ROW = "shared request pool"


def thread_cpu_s(pid: int) -> dict[int, tuple[str, float]]:
    """{thread id: (row name, CPU seconds so far)}; the row name is the thread's name
    without its number, or SHARED_ROW for a shared-pool worker."""
    out: dict[int, tuple[str, float]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue  # the thread ended
        name = stat[stat.index("(") + 1:stat.rindex(")")].rstrip("0123456789:-#")
        if name.startswith(tuple(p[:15] for p in SHARED_POOL)):  # /proc names stop at 15 characters
            name = SHARED_ROW
        utime, stime = parse_proc_stat(stat)
        out[int(tid)] = (name, (utime + stime) / tick)
    return out


def busiest(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> list[tuple[float, str]]:
    """CPU seconds per row between two samples (per thread id, so a renamed thread's
    earlier CPU is not counted again), largest first."""
    rows: dict[str, float] = {}
    for tid, (name, cpu) in after.items():
        rows[name] = rows.get(name, 0.0) + cpu - before.get(tid, (name, 0.0))[1]
    return sorted(((v, k) for k, v in rows.items()), reverse=True)


class Writer:
    """Archive batches shaped like the archiver's."""

    def __init__(self, archive: CqlArchive) -> None:
        self.archive = archive
        self.convs = [os.urandom(16) for _ in range(CONVERSATIONS)]
        self.seqs = [0] * CONVERSATIONS
        self.sent = 0

    def batch(self, n: int) -> list[ArchiveRecord]:
        out = []
        for _ in range(n):
            c = self.sent % CONVERSATIONS
            self.seqs[c] += 1
            self.sent += 1
            rec = message_pb2.MessageRecord(
                message_id=os.urandom(16), conversation_id=self.convs[c], conversation_seq=self.seqs[c],
                sender_id=1 + c, sender_device_id=7, client_message_id=os.urandom(16), message_type=1,
                body=os.urandom(64), created_at_ms=time.time_ns() // 1_000_000)
            out.append(ArchiveRecord(rec, 0))
        return out

    async def run(self, rate: float, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t = time.monotonic()
            await self.archive.write(0, self.batch(int(rate * BATCH_PERIOD_S)), [])
            await asyncio.sleep(max(0.0, BATCH_PERIOD_S - (time.monotonic() - t)))


def records_in_batches(session: CqlSession, rows: int) -> None:
    """The `records16` variant: the record writes of a batch as multi-partition batches."""
    plain = session.execute_many

    async def execute_many(calls, concurrency, what="write"):
        if what == "archive records":
            calls = list(calls)
            calls = [(partition_batch(calls[i:i + rows]), None) for i in range(0, len(calls), rows)]
        return await plain(calls, concurrency, what)

    session.execute_many = execute_many  # type: ignore[method-assign]


def fresh_dir(path: str) -> Path:
    """`path` emptied for a new node: SystemExit when it holds files this bench did not make."""
    d = Path(path)
    if d.exists() and any(d.iterdir()) and not (d / MARKER).exists():
        raise SystemExit(f"archive_cassandra: {d} is not empty and not this bench's (no {MARKER}); choose another --dir")
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    (d / MARKER).touch()
    return d


async def measure(args: argparse.Namespace, eng: CassandraEngine) -> None:
    """The warm-up, the windows and the idle figure against the running node `eng`."""
    session = CqlSession(ScyllaConfig(("127.0.0.1",), eng.port, "qim_bench", allow_single_node_dev=True))
    await session.open()
    await schema.apply(session)
    if args.variant == "records16":
        records_in_batches(session, 16)
    w = Writer(CqlArchive(session))
    await w.run(args.rate, 15.0)  # warm-up
    for i in range(args.windows):
        th0, c0, me0, n0 = thread_cpu_s(eng.pid), read_cpu_s(eng.pid), time.process_time(), w.sent
        t0 = time.monotonic()
        await w.run(args.rate, args.seconds)
        th1, c1, me1, n = thread_cpu_s(eng.pid), read_cpu_s(eng.pid), time.process_time(), w.sent - n0
        busy = busiest(th0, th1)[:6]
        print(f"{args.variant} window {i + 1}: {n} messages in {time.monotonic() - t0:.1f} s, cassandra "
              f"{(c1 - c0) * 1000 / n:.3f} ms/msg, bench client {(me1 - me0) * 1000 / n:.3f} ms/msg; threads: "
              + ", ".join(f"{k} {v * 1000 / n:.3f}" for v, k in busy), flush=True)
    i0 = read_cpu_s(eng.pid)
    await asyncio.sleep(20.0)
    print(f"{args.variant} idle: cassandra {(read_cpu_s(eng.pid) - i0) * 1000 / 20.0:.1f} ms/s")
    await session.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", choices=sorted(VARIANTS), default="batch")
    p.add_argument("--rate", type=float, default=250.0, help="messages a second (default 250)")
    p.add_argument("--seconds", type=float, default=30.0, help="seconds per window (default 30)")
    p.add_argument("--windows", type=int, default=3, help="windows after the warm-up (default 3)")
    p.add_argument("--dir", default="/tmp/qim-bench-cassandra", help="the node's data directory (emptied first if empty or made by this bench)")
    args = p.parse_args()
    if args.rate * BATCH_PERIOD_S < 1 or args.seconds <= 0 or args.windows < 1:
        p.error(f"--rate must be at least {1 / BATCH_PERIOD_S:g} (one message a batch), --seconds > 0, --windows >= 1")
    VariantEngine.variant = args.variant
    main, storage = pick_ports(2)
    # die_with_parent: a killed bench does not leave its node running (started on the main thread)
    eng = VariantEngine(fresh_dir(args.dir), {"main": main, "storage": storage}, lib=ensure_cassandra_jars(),
                        die_with_parent=True)
    eng.start()
    try:
        asyncio.run(measure(args, eng))
    finally:
        eng.stop()


if __name__ == "__main__":
    main()
