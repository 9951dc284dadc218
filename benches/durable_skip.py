"""CPU of the session's durable projection per group entry, writing every record
against skipping the records the low-latency path registered (docs/decisions/0167).

    .venv/bin/python benches/durable_skip.py [--shards 64] [--members 16] [--messages 400] [--rounds 3]

A private Redis (appendfsync always, as the stack's) and one DurableProjector's write
half, fed `--messages` group messages as the dispatch log holds them: one record per
shard with `--members` recipients each (the group step's 1,000-member group over 64
shards), in polls of SESSION_CONSUME_BATCH records, through `_batch` (no broker: the
records are handed over as the consumer would). Each round runs both ways on a fresh
Redis keyspace: "write" (nothing remembered: every record decoded and registered, as
before the decision) and "skip" (every record remembered by the low-latency path, as
a healthy node finds them). Prints this process's CPU and Redis's CPU (INFO cpu) per
1,000 entries, and checks that each way left every checkpoint at the end of its
partition and, for "write", every member's list holding the group.
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

from qim._core import ids  # noqa: E402
from qim._core import mailbox_seq as mseq  # noqa: E402
from qim._core.types import MessageCoord  # noqa: E402
from qim.consts import SESSION_CONSUME_BATCH  # noqa: E402
from qim.dev.redis_engine import start_redis  # noqa: E402
from qim.infra.redis.client import connect  # noqa: E402
from qim.services.session import consumer  # noqa: E402
from qim.services.session.consumer import DurableProjector  # noqa: E402
from qim.services.session.projected import Projected  # noqa: E402
from qim.stores.redis.keys import convs_key, session_shard_checkpoint_key  # noqa: E402
from qim.stores.redis.sessions import RedisSessionStore  # noqa: E402
from qim.wire.dispatch import Dispatch  # noqa: E402

BINDING = "bench|AAAAAAAAAAAAAAAAAAAAAA|64"
CREATED = 1_700_000_000_000


def records(shards: int, members: int, messages: int) -> list[SimpleNamespace]:
    """The dispatch log's records, in the order a consumer reads them (message by message)."""
    group = ids.conversation_id_group(0, 77)
    users = {s: [s * 100_000 + k + 1 for k in range(members)] for s in range(shards)}
    out = []
    for seq in range(1, messages + 1):
        mid = ids.compose_message_id(CREATED + seq, 0, 0, 1)
        for s in range(shards):
            value = Dispatch(0, ids.dispatch_id(mid, s), MessageCoord(mid, group, seq, users[0][0], CREATED + seq, 1,
                                                                       b""),
                             s, b"c" * 16, tuple(users[s]), b"hello " * 10).encode()
            out.append(SimpleNamespace(partition=lambda s=s: s, offset=lambda o=seq - 1: o, value=lambda v=value: v))
    return out


class NoBroker:
    """The projector's consumer here: records are handed to `_batch` directly, and a
    real consumer's threads would spend this process's CPU dialling a broker."""

    def __init__(self, *args: object) -> None:
        pass

    async def close(self) -> None:
        return None


consumer.AsyncConsumer = NoBroker  # type: ignore[misc,assignment]


def redis_cpu_s(info: dict) -> float:
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def one(addr: str, shards: int, log: list, skip: bool) -> tuple[float, float]:
    """(this process's, Redis's) CPU seconds to project `log` one way."""
    redis = connect(addr)
    await redis.flushall()
    sessions = RedisSessionStore(redis)
    projected = Projected(limit=len(log) + 1)
    if skip:
        for m in log:
            projected.add(m.partition(), mseq.compose(1, m.offset()))
    proj = DurableProjector("127.0.0.1:1", sessions, shards, lambda regs: None, projected=projected)
    proj._binding = BINDING
    for s in range(shards):
        tenure = f"t{s}"
        await sessions.checkpoint_bind(s, BINDING, 0, tenure)
        proj.next[s], proj.fences[s], proj.tenures[s] = 0, 0, tenure
    cpu0, r0 = time.process_time(), redis_cpu_s(await redis.info("cpu"))
    for i in range(0, len(log), SESSION_CONSUME_BATCH):
        await proj._batch(log[i:i + SESSION_CONSUME_BATCH])
    cpu, rcpu = time.process_time() - cpu0, redis_cpu_s(await redis.info("cpu")) - r0
    ends = len(log) // shards
    assert not proj.stopped and not proj.held, (proj.stopped, proj.held)
    for s in range(shards):
        assert await redis.hget(session_shard_checkpoint_key(s), "p") == str(ends).encode(), s
    if not skip:  # the lists written: every member holds the group at its newest message
        group = ids.conversation_id_group(0, 77).hex()
        assert await redis.zscore(convs_key(0, 1), group) == CREATED + ends
    await proj.close()
    await redis.aclose()
    return cpu, rcpu


def main() -> None:
    """Run the bench (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shards", type=int, default=64)
    p.add_argument("--members", type=int, default=16)
    p.add_argument("--messages", type=int, default=400)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    log = records(args.shards, args.members, args.messages)
    entries = len(log) * args.members
    with tempfile.TemporaryDirectory(prefix="qim-bench-durable-skip-") as tmp:
        engine = start_redis(Path(tmp) / "redis", die_with_parent=True)  # a killed bench leaves no Redis
        try:
            for r in range(args.rounds):
                for skip in (False, True):
                    cpu, rcpu = asyncio.run(one(engine.addr, args.shards, log, skip))
                    print(f"{'skip ' if skip else 'write'} round={r + 1} records={len(log)} entries={entries} "
                          f"session_cpu_ms_per_1k={cpu * 1e6 / entries:.2f} "
                          f"redis_cpu_ms_per_1k={rcpu * 1e6 / entries:.2f}", flush=True)
        finally:
            engine.stop()


if __name__ == "__main__":
    main()
