"""A materializer retry after a Redis failure whose script DID apply (docs/design.md §5.4):
the shard must recognise its own write and go on, never stop; a genuine second writer
of the watermark must still stop it (MailboxDirty, QIM_WM_CONFLICT).

CI failure this guards (the live fuzz on a loaded 2-core machine): the client's read of
a finish/fused script timed out (redis-py's 5 s socket timeout) after Redis had applied
it; the re-read of the watermark failed too, so the retry ran the script again with the
blob this node had written BEFORE the record, and the compare-and-set stopped a shard
that only this node writes ("shard 2: offset 661: MailboxDirty: QIM_WM_CONFLICT").

Real Redis throughout, the real materializer loop; the dispatch partitions are a
stand-in. One test stalls Redis (SIGSTOP) past a real client's socket timeout, which
reproduces the CI failure as it happened; the others lose replies at chosen points.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from types import SimpleNamespace
from typing import Any, Optional

import pytest
import redis.asyncio as aioredis
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

from qim._core import ids, watermark
from qim._core import mailbox_seq as mseq
from qim._core.types import MessageCoord
from qim.faults import MAILBOX_POINTS, FaultPoints
from qim.infra.redis.client import connect
from qim.services.mailbox.materializer import MailboxMaterializer
from qim.stores.errors import StoreUnavailable
from qim.stores.mailboxes import day_of
from qim.stores.redis.mailboxes import RedisMailboxStore
from qim.wire.dispatch import Dispatch

TENANT, SHARD, EPOCH = 7, 5, 1
NOW_MS = time.time_ns() // 1_000_000
SETTLE_S = 30.0  # retries back off from 0.2 s; a loaded machine still settles well within this


class LostReplies(RedisMailboxStore):
    """The real store, except that the next `lose` call (fused or finish) loses its reply:
    - "applied-read-fails": Redis applies it, the reply is lost, and the next watermark
      read fails too (Redis stalled past the client's timeout);
    - "applied-before-retry": it reaches Redis only just before the retry's first call;
    - "applied-after-retry": it reaches Redis only after the retry finished (its own
      refusal, if any, goes nowhere: the connection is gone);
    - "unsent": it never reaches Redis.
    After the loss, every call first waits for `gate` (when set): the test acts meanwhile."""

    def __init__(self, client: Any, lose: str = "", mode: str = "") -> None:
        super().__init__(client)
        self.lose, self.mode = lose, mode
        self.late: Optional[Any] = None  # the lost call, still to reach Redis
        self.failed_reads = 0
        self.lost = asyncio.Event()
        self.gate: Optional[asyncio.Event] = None

    async def _lost(self, name: str, call: Any) -> Any:
        if name != self.lose:
            if self.gate is not None and self.lost.is_set():
                await self.gate.wait()
            if self.late is not None and self.mode == "applied-before-retry":
                await self._arrive()
            out = await call()
            if self.late is not None and self.mode == "applied-after-retry" and name in ("fused", "finish"):
                await self._arrive()
            return out
        self.lose = ""
        if self.mode in ("applied-read-fails", "applied-before-retry", "applied-after-retry"):
            self.late = call()  # the coroutine holds the arguments of the lost call
        if self.mode == "applied-read-fails":
            await self._arrive()
            self.failed_reads = 1
        self.lost.set()
        raise StoreUnavailable(f"{name}: redis TimeoutError")

    async def _arrive(self) -> None:
        late, self.late = self.late, None
        assert late is not None
        try:
            await late
        except Exception:  # noqa: BLE001 - a late call's reply (or refusal) is never read
            pass

    async def load_watermark(self, shard: int):
        if self.gate is not None and self.lost.is_set():
            await self.gate.wait()
        if self.failed_reads:
            self.failed_reads -= 1
            raise StoreUnavailable("watermark read: redis TimeoutError")
        return await super().load_watermark(shard)

    async def begin(self, *a, **kw):
        return await self._lost("begin", lambda: super(LostReplies, self).begin(*a, **kw))

    async def fused(self, *a, **kw):
        return await self._lost("fused", lambda: super(LostReplies, self).fused(*a, **kw))

    async def finish(self, *a, **kw):
        return await self._lost("finish", lambda: super(LostReplies, self).finish(*a, **kw))


class DispatchLog:
    """Stand-in for the dispatch partitions: hands each appended record out once."""

    def __init__(self) -> None:
        self.pending: list = []
        self.paused: set[int] = set()

    def add(self, shard: int, offset: int, value: bytes, appended_ms: Optional[int] = None) -> None:
        """Append a record; `appended_ms`: its broker append time (default now)."""
        appended = (TIMESTAMP_LOG_APPEND_TIME, appended_ms or int(time.time() * 1000))  # LogAppendTime
        self.pending.append(SimpleNamespace(partition=lambda: shard, offset=lambda: offset, value=lambda: value,
                                            timestamp=lambda: appended))

    async def assign(self, topic: str, starts: dict[int, int]) -> None:
        self.starts = starts

    async def high_watermarks(self, topic: str, parts: list[int]) -> dict[int, int]:
        return {p: 0 for p in parts}

    async def consume(self, max_records: int, timeout: float) -> list:
        out, self.pending = self.pending[:max_records], self.pending[max_records:]
        await asyncio.sleep(0.005)
        return out

    async def pause(self, topic: str, parts: list[int]) -> None:
        self.paused |= set(parts)

    async def resume(self, topic: str, parts: list[int]) -> None:
        self.paused -= set(parts)

    async def close(self) -> None:
        pass


def record(offset: int, recipients: tuple[int, ...]) -> bytes:
    """A dispatch record for SHARD to `recipients`."""
    coord = MessageCoord(b"M" + offset.to_bytes(15, "big"), ids.conversation_id_direct(TENANT, 1, 2), offset + 1,
                         recipients[0], NOW_MS + offset, 1, b"")
    return Dispatch(TENANT, b"D" + offset.to_bytes(15, "big"), coord, SHARD, b"c" * 16, recipients,
                    f"m{offset}".encode()).encode()


class StepWise(FaultPoints):
    """Armed, so records take begin → append → finish (qim/services/mailbox/record.py),
    yet no point is ever hit."""

    @property
    def active(self) -> bool:
        return True


class Node:
    """One materializer owning SHARD over `store`, fed by its own DispatchLog; `path`
    "step-wise" takes the three-call path, any other the fused one."""

    def __init__(self, store: RedisMailboxStore, path: str = "fused") -> None:
        self.log = DispatchLog()
        self.pushes: list[int] = []
        faults = StepWise("", MAILBOX_POINTS) if path == "step-wise" else FaultPoints("", MAILBOX_POINTS)
        self.m = MailboxMaterializer("unused:1", store, [SHARD], lambda t, seq, users, event, trace, inline: self.pushes.append(seq),
                                     faults, consumer=self.log)  # type: ignore[arg-type]

    async def __aenter__(self) -> "Node":
        await self.m.start()
        self.task = asyncio.get_running_loop().create_task(self.m.run())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

    async def feed(self, offset: int, recipients: tuple[int, ...]) -> None:
        """Hand out the record at `offset`; return when it is final or the shard stopped."""
        self.log.add(SHARD, offset, record(offset, recipients))
        await self.settle(offset)

    async def settle(self, offset: int) -> None:
        """Return when the record at `offset` is final or the shard stopped."""
        state = self.m.shards[SHARD]
        deadline = time.monotonic() + SETTLE_S
        while not state.dirty and watermark.start_offset(state.blob) <= offset:
            assert time.monotonic() < deadline, f"record {offset} neither final nor stopped in {SETTLE_S} s"
            await asyncio.sleep(0.01)


@pytest.fixture
async def redis(private_redis):
    client = connect(private_redis.addr)
    yield client
    await client.aclose()


def seq(offset: int) -> int:
    return mseq.compose(EPOCH, offset)


async def offsets_of(store: RedisMailboxStore, user: int) -> list[int]:
    return [o for _, o in await store.read_range(TENANT, user, [day_of(NOW_MS)], -1, 1 << 40, 100)]


PATHS = {"fused": (11,), "fused-many": (11, 12, 13), "step-wise": (11, 12, 13)}


class Stalling(RedisMailboxStore):
    """The real store over a real Redis that this test stalls: once armed with a method
    name, Redis is SIGSTOPped just before that call goes out, and SIGCONTed when the
    second call after it has failed (the client's socket timeout)."""

    def __init__(self, client: Any, pid: int) -> None:
        super().__init__(client)
        self.pid = pid
        self.stall_on = ""
        self.failures = 0

    async def _watch(self, name: str, call: Any) -> Any:
        if name == self.stall_on:
            self.stall_on = ""
            os.kill(self.pid, signal.SIGSTOP)
        try:
            return await call()
        except StoreUnavailable:
            self.failures += 1
            if self.failures == 2:
                os.kill(self.pid, signal.SIGCONT)
            raise

    async def load_watermark(self, shard: int):
        return await self._watch("load_watermark", lambda: super(Stalling, self).load_watermark(shard))

    async def begin(self, *a, **kw):
        return await self._watch("begin", lambda: super(Stalling, self).begin(*a, **kw))

    async def fused(self, *a, **kw):
        return await self._watch("fused", lambda: super(Stalling, self).fused(*a, **kw))

    async def finish(self, *a, **kw):
        return await self._watch("finish", lambda: super(Stalling, self).finish(*a, **kw))


@pytest.mark.parametrize("path", sorted(PATHS))
async def test_a_redis_stalled_past_the_client_timeout_does_not_stop_the_shard(private_redis, path):
    """The CI failure with a real Redis and a real client: Redis stalls (here SIGSTOP; in CI
    an appendfsync-always Redis on a loaded disk) longer than the client's socket timeout
    while record 1's watermark-writing script is in flight. The client gives up, and so
    does the materializer's next call (before the fix: its re-read of the watermark).
    Redis resumes right then and applies the queued script first, so the repeat that
    follows meets the blob this node itself just wrote."""
    recipients = PATHS[path]
    # as qim.infra.redis.client.connect builds it (a pool: no retries inside redis-py),
    # with a socket timeout of 0.5 s instead of redis-py's 5 s
    client = aioredis.Redis(connection_pool=aioredis.BlockingConnectionPool(
        host="127.0.0.1", port=private_redis.port, socket_timeout=0.5, socket_connect_timeout=0.5))
    store = Stalling(client, private_redis.pid)
    try:
        async with Node(store, path) as node:
            await node.feed(0, recipients)
            store.stall_on = "finish" if path == "step-wise" else "fused"
            try:
                await node.feed(1, recipients)
            finally:
                os.kill(private_redis.pid, signal.SIGCONT)
            await node.feed(2, recipients)
            state = node.m.shards[SHARD]
            assert state.dirty == "", "a shard only this node writes was stopped"
            assert store.failures >= 2  # the stall really cost the in-flight call and the next
            blob, _ = await store.load_watermark(SHARD)
            assert blob == state.stored_blob and watermark.start_offset(blob) == 3
        for user in recipients:
            assert await offsets_of(store, user) == [0, 1, 2]
    finally:
        await client.aclose()


@pytest.mark.parametrize("mode", ["applied-read-fails", "applied-before-retry", "applied-after-retry", "unsent"])
@pytest.mark.parametrize("path", sorted(PATHS))
async def test_a_retry_after_a_lost_reply_recognises_its_own_write_and_the_shard_goes_on(redis, path, mode):
    recipients = PATHS[path]
    store = LostReplies(redis)
    async with Node(store, path) as node:
        await node.feed(0, recipients)
        store.lose, store.mode = ("finish" if path == "step-wise" else "fused"), mode
        await node.feed(1, recipients)  # the reply of its watermark-writing call is lost
        await node.feed(2, recipients)
        state = node.m.shards[SHARD]
        assert state.dirty == "", "a shard only this node writes was stopped"
        blob, _ = await RedisMailboxStore(redis).load_watermark(SHARD)  # a read of the test's own
        assert blob == state.stored_blob and watermark.start_offset(blob) == 3
        assert node.m._m.retries._value.get() >= 1  # the fault really happened
    for user in recipients:
        assert await offsets_of(store, user) == [0, 1, 2]  # each entry once, none lost
    assert node.pushes == [seq(0), seq(1), seq(2)]  # the recovered record is pushed too, once


async def test_a_second_writer_of_the_watermark_stops_the_shard_even_with_the_same_blob(redis):
    """Two owners in lockstep write identical blobs; the second must still stop."""
    store = RedisMailboxStore(redis)
    async with Node(store) as a, Node(store) as b:
        await a.feed(0, (11,))
        await b.feed(0, (11,))  # B finishes the same record: the blob it would write is already stored
        assert "QIM_WM_CONFLICT" in b.m.shards[SHARD].dirty
        await a.feed(1, (11, 12))
        assert a.m.shards[SHARD].dirty == ""  # B's refused call wrote nothing


@pytest.mark.parametrize("path", sorted(PATHS))
async def test_a_retry_does_not_take_another_writers_write_for_its_own(redis, path):
    """A's call fails before reaching Redis; B (a second owner) finishes that record with
    the very blob A would write; A's retry must stop the shard, not adopt B's write."""
    recipients = PATHS[path]
    store = LostReplies(redis)
    async with Node(store, path) as a:
        await a.feed(0, recipients)
        async with Node(RedisMailboxStore(redis), path) as b:  # starts from A's watermark
            store.lose, store.mode = ("finish" if path == "step-wise" else "fused"), "unsent"
            store.gate = asyncio.Event()
            a.log.add(SHARD, 1, record(1, recipients))
            await asyncio.wait_for(store.lost.wait(), SETTLE_S)  # A's first try failed; its retry waits
            await b.feed(1, recipients)
            assert b.m.shards[SHARD].dirty == ""
            store.gate.set()
            state = a.m.shards[SHARD]
            deadline = time.monotonic() + SETTLE_S
            while not state.dirty and watermark.start_offset(state.blob) <= 1:
                assert time.monotonic() < deadline, "A's retry neither finished nor stopped"
                await asyncio.sleep(0.01)
            assert "QIM_WM_CONFLICT" in state.dirty, "A adopted B's write as its own"
